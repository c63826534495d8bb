"""Config files by name: 'wsabie_corel5k:small' → configs/wsabie_corel5k.py's
get_config('small').

The folder is $WSABIE_JAX_CONFIGS when set, else ./configs (launch scripts,
notebooks and tests run from the repository's root). Config files are files,
not an installed package, so a user's own folder works the same way.
"""
from __future__ import annotations

import os
import pathlib

import ml_collections

from wsabie_jax import config as config_lib

ENV = 'WSABIE_JAX_CONFIGS'


def directory() -> pathlib.Path:
  """The configs folder ($WSABIE_JAX_CONFIGS, else ./configs); an error naming both when absent."""
  folder = pathlib.Path(os.environ.get(ENV) or 'configs')
  if not folder.is_dir():
    raise FileNotFoundError(f'no configs folder at {folder.resolve()}: run from the repository '
                            f'root, or set {ENV} to the folder holding the config files')
  return folder


def load(name_and_arg: str) -> ml_collections.ConfigDict:
  """'wsabie_corel5k:small' → configs/wsabie_corel5k.py's get_config('small')."""
  name, _, arg = name_and_arg.partition(':')
  return config_lib.load(str(directory() / f'{name}.py') + (f':{arg}' if arg else ''))

"""Config schema (dataclass ↔ ConfigDict), the `:arg` parser,
and loading a config file by path as `--config=FILE.py:ARG` does."""
from __future__ import annotations

import importlib.util
import pathlib

import ml_collections

from wsabie_jax.config.args import parse_arg
from wsabie_jax.config.schema import from_config, to_config

__all__ = ['from_config', 'load', 'load_module', 'parse_arg', 'to_config']


def load(spec: str | pathlib.Path) -> ml_collections.ConfigDict:
  """'configs/FILE.py[:ARG]' → FILE's get_config(ARG), as ml_collections'
  config_flags loads it (by path: configs/ is files, not an installed package)."""
  path, _, arg = str(spec).partition(':')
  module = load_module(path)
  return module.get_config(arg) if arg else module.get_config()


def load_module(path: str | pathlib.Path):
  """A config file as a module (its get_config and whatever else it defines)."""
  if not str(path).endswith('.py') or not pathlib.Path(path).is_file():
    raise ValueError(f'{str(path)!r}: expected a config file configs/FILE.py[:ARG]')
  module_spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module

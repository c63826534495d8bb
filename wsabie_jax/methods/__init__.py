"""The method registry: `config.method` → the module that builds it.

Each module (wsabie.py, skipgram.py, parts.py) defines the same functions:

  base_config(data=None, **sections)   the method's config, defaults from its dataclasses
  build(config, mesh) -> Method        what the training loop needs (training/method.py)
  like_state(config, vocab)            a state shaped like a workdir's checkpoints
  scorer(config, vocab, state)         (embed_fn, labels_YxD): what annotation ranks with
  evaluate(config, vocab, state, split, baseline)   a restored model's metrics on a split
  check_config(config) -> {section: dataclass}   its sections read and checked (ValueError)
  fit(config) -> (config, {field: value})         its 'auto' fields fitted to the data

An explicit dict, no registration by import side effect.
"""
from __future__ import annotations

import importlib
from types import ModuleType

import ml_collections

from wsabie_jax.config.schema import ConfigError
from wsabie_jax.training import settings

REGISTRY = {
    'wsabie': 'wsabie_jax.methods.wsabie',      # paper 000 (and 001, 003)
    'skipgram': 'wsabie_jax.methods.skipgram',  # paper 004
    'parts': 'wsabie_jax.methods.parts',        # paper 002
}


def get(name: str) -> ModuleType:
  if name not in REGISTRY:
    raise ValueError(f'config.method={name!r} is not one of {sorted(REGISTRY)}')
  return importlib.import_module(REGISTRY[name])


def of(config: ml_collections.ConfigDict) -> ModuleType:
  """The module of config.method."""
  if 'method' not in config:
    raise ValueError(f'config.method is missing: one of {sorted(REGISTRY)}')
  return get(config.method)


def build(config: ml_collections.ConfigDict, mesh):
  return of(config).build(config, mesh)


def check(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Every section of a config checked before a run touches anything: raises
  ConfigError naming the first bad field (or the unknown keys, and the valid
  ones). Returns the config with the defaults of what it leaves out filled in."""
  try:
    module = of(config)
    valid = set(module.base_config())
    unknown = sorted(set(config) - valid)
    if unknown:
      raise ValueError(f'config: unknown section(s) {unknown}; valid: {sorted(valid)}')
    sections = module.check_config(config)
  except (ValueError, TypeError) as error:
    raise ConfigError(str(error)) from None
  settings.check_shared(config)
  return settings.complete(config, sections)

"""The method registry: `config.method` → the module that builds it.

Each module (wsabie.py, skipgram.py, parts.py) is a MethodModule: the same
functions, checked by tests/contracts_test.py. An explicit dict, no
registration by import side effect.
"""
from __future__ import annotations

import importlib
from typing import Any, Protocol

import ml_collections

from wsabie_jax.config.schema import ConfigError
from wsabie_jax.training import settings

class MethodModule(Protocol):
  """What a method's module defines (methods/wsabie.py is the model)."""

  def base_config(self, data: ml_collections.ConfigDict | None = None,
                  **sections) -> ml_collections.ConfigDict:
    """The method's config on `data` (its default data when None), defaults
    from its dataclasses and training/settings.py."""

  def check_config(self, config: ml_collections.ConfigDict) -> dict:
    """Its own sections read by their dataclasses, {name: instance} (ValueError naming a field)."""

  def fit(self, config: ml_collections.ConfigDict) -> tuple[ml_collections.ConfigDict, dict]:
    """The config with its 'auto' fields fitted to the training data, {field: value}."""

  def build(self, config: ml_collections.ConfigDict, mesh) -> Any:
    """A training/method.Method: what the training loop needs."""

  def like_state(self, config: ml_collections.ConfigDict, vocab: dict) -> Any:
    """A state shaped like a workdir's checkpoints, to restore into."""

  def scorer(self, config: ml_collections.ConfigDict, vocab: dict, state, workdir=None) -> tuple:
    """(embed_fn(feat_idx_BxF, feat_val_BxF) -> images_BxD, labels_YxD): what annotation
    ranks with (`workdir`: the run's, for what the method saved beside its checkpoints)."""

  def evaluate(self, config: ml_collections.ConfigDict, vocab: dict, state, split: str,
               baseline: bool, workdir=None) -> dict:
    """A restored model's metrics on a split of its data."""


REGISTRY = {
    'wsabie': 'wsabie_jax.methods.wsabie',      # paper 000 (and 001, 003)
    'skipgram': 'wsabie_jax.methods.skipgram',  # paper 004
    'parts': 'wsabie_jax.methods.parts',        # paper 002
}


def get(name: str) -> MethodModule:
  if name not in REGISTRY:
    raise ValueError(f'config.method={name!r} is not one of {sorted(REGISTRY)}')
  return importlib.import_module(REGISTRY[name])


def of(config: ml_collections.ConfigDict) -> MethodModule:
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
  return settings.complete(config, {**settings.check_shared(config), **sections})

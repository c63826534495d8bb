"""Checks the sections every method shares (train, eval, data) before a run
touches anything: unknown keys, types and ranges, each error one line naming
the field (docs/DESIGN.md §4). The method's own sections are checked by its
dataclasses (schema.from_config); methods.check runs both."""
from __future__ import annotations

import ml_collections

from wsabie_jax.config import presets
from wsabie_jax.config.schema import check_ranges, check_type

TRAIN_RANGES = dict(batch_size='>=1', positives_per_row='>=1', num_epochs='>=0', max_steps='>=0', max_seconds='>=0',
                    log_every_steps='>=1', eval_every_steps='>=1', evals_per_budget='>=0', max_epochs_between_evals='>=0', eval_subset='>=0',
                    patience='>=1', checkpoint_every_steps='>=1', num_devices='>=0',
                    steps_per_call='>=1', probe_pairs='>=0')
EVAL_RANGES = dict(f1_k='>=1', batch_size='>=1', label_chunk='>=1')
DATA_RANGES = dict(validation_fraction='[0,1)', holdout_fraction='[0,1)', bias_feature='>=0')
PLATFORMS = ('', 'cpu', 'gpu', 'cuda', 'rocm', 'tpu')
DATA_KINDS = ('synthetic', 'mulan', 'libsvm', 'shards', 'tfds')
PLAN_PACKS = ('auto', 'host', 'device')  # training/dispatch.py


class ConfigError(ValueError):
  """A config value out of type or range; the message names the field."""


def check_shared(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError on the first bad field of config.train, .eval or .data."""
  try:
    check_type('config.seed', config.get('seed', 0), int)
    check_ranges({'seed': config.get('seed', 0)}, 'config', seed='>=0')  # (numpy's RNGs)
    _section(config.train, presets.train(), 'config.train', TRAIN_RANGES)
    if not (config.train.max_steps or config.train.num_epochs):
      raise ValueError('config.train: num_epochs and max_steps are both 0 (nothing to train)')
    if config.train.platform not in PLATFORMS:
      raise ValueError(f'config.train.platform={config.train.platform!r} is not one of {PLATFORMS}')
    if config.train.plan_packs not in PLAN_PACKS:
      raise ValueError(f'config.train.plan_packs={config.train.plan_packs!r} is not one of '
                       f'{PLAN_PACKS}')
    _section(config.eval, presets.evaluation(), 'config.eval', EVAL_RANGES)
    if not config.eval.ks or min(config.eval.ks) < 1:
      raise ValueError(f'config.eval.ks={tuple(config.eval.ks)} must be positive ranks')
    _data(config.data)
  except ValueError as error:
    raise ConfigError(str(error)) from None


def _section(section, defaults: ml_collections.ConfigDict, where: str, ranges: dict) -> None:
  """Keys are the defaults' keys; each value has its default's type; ranges hold."""
  unknown = sorted(set(section) - set(defaults))
  if unknown:
    raise ValueError(f'{where}: unknown field(s) {unknown}; valid: {sorted(defaults)}')
  for key, default in defaults.items():
    if key in section:
      hint = tuple[int, ...] if isinstance(default, (tuple, list)) else type(default)
      value = section[key]
      check_type(f'{where}.{key}', tuple(value) if isinstance(value, list) else value, hint)
  check_ranges({**defaults, **section}, where, **ranges)


def _data(data) -> None:
  if data.kind not in DATA_KINDS:
    raise ValueError(f'config.data.kind={data.kind!r} is not one of {DATA_KINDS}')
  if data.normalize not in ('l2', 'none'):
    raise ValueError(f"config.data.normalize={data.normalize!r} is not 'l2' or 'none'")
  common = presets.synthetic_data()
  for key in DATA_RANGES:
    if key in data:
      check_type(f'config.data.{key}', data[key], float)
  check_ranges({k: data.get(k, common[k]) for k in DATA_RANGES}, 'config.data', **DATA_RANGES)
  if data.kind == 'synthetic':
    check_ranges(data, 'config.data', num_train='>=1', num_test='>=0')
    defaults = common.synthetic
    unknown = sorted(set(data.synthetic) - set(defaults))
    if unknown:
      raise ValueError(f'config.data.synthetic: unknown field(s) {unknown}; valid: '
                       f'{sorted(defaults)}')
    check_ranges(data.synthetic, 'config.data.synthetic', num_labels='>=1', num_features='>=1',
                 nnz='>=1', max_labels='>=1', group_size='>=1', words_per_label='>=1',
                 signal='[0,1]', sibling_share='[0,1]', sibling_labels='[0,1]')

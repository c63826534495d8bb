"""A run's whole config, field by field, with where each value came from:
`launch/train.py --config=… --print_config` prints it without training."""
from __future__ import annotations

import ml_collections

from wsabie_jax import methods
from wsabie_jax.data import settings as data_settings
from wsabie_jax.config.schema import defaults

SOURCES = ('default', 'config file', 'flag', 'fitted')


def rows(config: ml_collections.ConfigDict, fitted: dict,
         flagged: list[str]) -> list[tuple[str, object, str]]:
  """(field, value, source) for every field of a checked config, its 'auto'
  fields fitted; `fitted`: the method's {field: value} for those; `flagged`: the fields given
  as --config.FIELD=… on the command line. A field is 'default' when it holds
  its method's default (data: its kind's), else it came from the config file."""
  base = methods.of(config).base_config().to_dict()
  base['data'] = defaults(data_settings.CLASSES[config.data.kind])
  out = []
  for name, value in _flat(config.to_dict()):
    if name in fitted:
      source = 'fitted'
    elif name in flagged:
      source = 'flag'
    elif _lookup(base, name) == value:
      source = 'default'
    else:
      source = 'config file'
    out.append((name, value, source))
  return out


def text(config: ml_collections.ConfigDict, fitted: dict, flagged: list[str]) -> str:
  table = rows(config, fitted, flagged)
  width = max(len(name) for name, _, _ in table)
  values = [repr(tuple(v)) if isinstance(v, list) else repr(v) for _, v, _ in table]
  value_width = min(max(len(v) for v in values), 48)
  return '\n'.join(f'{name:<{width}}  {v:<{value_width}}  {source}'
                   for (name, _, source), v in zip(table, values))


def _flat(tree: dict, prefix: str = ''):
  for key in sorted(tree):
    value = tree[key]
    if isinstance(value, dict):
      yield from _flat(value, f'{prefix}{key}.')
    else:
      yield f'{prefix}{key}', value


_MISSING = object()


def _lookup(tree: dict, name: str):
  for key in name.split('.'):
    if not isinstance(tree, dict) or key not in tree:
      return _MISSING
    tree = tree[key]
  return tree

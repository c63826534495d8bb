"""One config schema: config sections are dataclasses, field for field.

A method's settings are a frozen dataclass whose fields are either values or
further dataclasses (its sections: `model`, `loss`, `optim`, …). `to_config`
writes the defaults out as a ConfigDict, so a config file starts from them and
overrides a few; `from_config` reads a ConfigDict back, section by section,
rejecting keys the dataclass does not have. The dataclasses are the only place
a default is written (docs/DESIGN.md §4).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, ClassVar, TypeVar

import ml_collections

T = TypeVar('T')


class ConfigError(ValueError):
  """A config value out of type or range; the message names the field."""

# A float field that may also be +inf (written `float('inf')` in a config
# file, `inf` on the command line): `Annotated[float, UNBOUNDED]`. Other
# floats must be finite (a NaN or inf there is a typo that trains garbage).
UNBOUNDED = 'inf allowed: no bound'
# A field the method fits to the data when the config says 'auto' (the
# Mulan config's batch size, pairs a row, draws): `Annotated[int, AUTO]`. The
# value a run used is written into its config.json.
AUTO = 'auto'


def _section_types(cls) -> dict[str, type]:
  """The fields of `cls` that are themselves dataclasses (its sections)."""
  hints = typing.get_type_hints(cls)  # (Annotated stripped)
  return {f.name: hints[f.name] for f in dataclasses.fields(cls)
          if dataclasses.is_dataclass(hints[f.name])}


def to_config(cls, **overrides) -> ml_collections.ConfigDict:
  """The defaults of a (section) dataclass as a ConfigDict; fields without a
  default (sizes read from the data) are left out."""
  c = ml_collections.ConfigDict(_defaults(cls))
  with c.ignore_type():  # ('auto' for an int; from_config checks every type)
    c.update(overrides)
  return c


# A field a resumed run may change (a budget, a schedule, the devices):
# `Annotated[int, MAY_CHANGE]`; the others must match the run's (training/workdir.py).
MAY_CHANGE = 'may change on resume'


def marked(cls, mark: str, prefix: str) -> frozenset[str]:
  """'prefix.field' for each field of `cls` annotated with `mark`."""
  hints = typing.get_type_hints(cls, include_extras=True)
  return frozenset(f'{prefix}.{name}' for name, hint in hints.items()
                   if typing.get_origin(hint) is typing.Annotated and mark in hint.__metadata__)


def auto(section: ml_collections.ConfigDict, *names: str, **values) -> ml_collections.ConfigDict:
  """A copy of a config section with the named fields 'auto' (fitted to the data
  when the run starts) and `values` set, its types left unchecked until
  `from_config`: so `c.train.batch_size = 512` or `--config.train.batch_size=512`
  later replaces 'auto' with a number."""
  return ml_collections.ConfigDict({**section.to_dict(), **dict.fromkeys(names, AUTO), **values},
                                   type_safe=False)


def _defaults(cls, instance=None) -> dict:
  """Field → default (a section: its own defaults, or its default instance's values)."""
  sections = _section_types(cls)
  out = {}
  for f in dataclasses.fields(cls):
    if instance is not None:
      value = getattr(instance, f.name)
    elif f.default is not dataclasses.MISSING:
      value = f.default
    elif f.default_factory is not dataclasses.MISSING:
      value = f.default_factory()
    else:
      continue
    out[f.name] = _defaults(sections[f.name], value) if f.name in sections else value
  return out


def defaults(cls) -> dict:
  """The defaults of a dataclass, sections nested: what a config gets without a value."""
  return _defaults(cls)


def from_config(cls: type[T], config: ml_collections.ConfigDict | dict, where: str = 'config',
                base: Any = None, **given: Any) -> T:
  """`cls` from the config's fields (sections recursively) plus `given` values
  (sizes read from the data). A key `cls` lacks is an error naming it and the
  valid ones; lists become tuples (ConfigDicts store tuples as lists). Fields
  the config leaves out take `base`'s values (a section's default instance), or
  the class's defaults."""
  sections = _section_types(cls)
  names = {f.name for f in dataclasses.fields(cls)}
  values = dict(config.items()) if config is not None else {}
  unknown = sorted(set(values) - names)
  if unknown:
    raise ValueError(f'{where}: unknown field(s) {unknown}; valid: {sorted(names - set(given))}')
  hints = typing.get_type_hints(cls, include_extras=True)
  kwargs = {}
  for name, value in values.items():
    if name in sections:
      section_base = getattr(base, name) if base is not None else next(
          (f.default for f in dataclasses.fields(cls) if f.name == name
           and f.default is not dataclasses.MISSING), None)
      kwargs[name] = from_config(sections[name], value, f'{where}.{name}', section_base)
    else:
      kwargs[name] = check_type(f'{where}.{name}', tuple(value) if isinstance(value, list)
                                else value, hints[name])
  kwargs.update(given)
  try:
    return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
  except ValueError as error:  # a __post_init__ check: say where the section sits
    message = str(error)
    for name in (cls.__name__, where.rpartition('.')[2]):
      if message.startswith(name + '.'):
        raise ValueError(where + message[len(name):]) from None
    raise ValueError(f'{where}: {message}') from None


class MethodSettings:
  """The base of a method's settings (wsabie/, parts/, skipgram/ settings.py):
  its config sections model, loss and optim, field for field, and the sizes
  read from the data. One way for every method to write its defaults out,
  read a config back and hand on its sections."""
  SECTIONS: ClassVar[tuple[str, ...]] = ('model', 'loss', 'optim')

  @classmethod
  def defaults(cls) -> dict:
    """Each section's defaults as a ConfigDict: a method's base config."""
    config = to_config(cls)
    return {name: config[name] for name in cls.SECTIONS}

  @classmethod
  def read(cls, config: ml_collections.ConfigDict, **sizes: int):
    """The settings a config holds, with the sizes the data gave; an error
    names its field (config.loss.kind …)."""
    return from_config(cls, {name: config[name] for name in cls.SECTIONS}, 'config', **sizes)

  def by_section(self) -> dict:
    return {name: getattr(self, name) for name in self.SECTIONS}


def check_type(name: str, value: Any, hint) -> Any:
  """`value` when it is a `hint` (int, float, bool, str, tuple[int, ...]); ints
  pass as floats, and floats must be finite unless the hint is
  Annotated[float, UNBOUNDED] (+inf allowed). Else a ValueError naming the field."""
  if typing.get_origin(hint) is typing.Annotated:
    hint, *marks = typing.get_args(hint)
    if AUTO in marks and value == AUTO:
      return value
    if AUTO in marks and isinstance(value, str):  # (a --config.X=512 override of an 'auto' field)
      try:
        value = hint(value)
      except ValueError:
        pass
    if AUTO in marks and not _is(value, hint):
      raise ValueError(f"{name}={value!r}: expected {hint.__name__} or 'auto' (fitted to the data)")
    if UNBOUNDED in marks and isinstance(value, float) and value == math.inf:
      return value
    if UNBOUNDED in marks and not _is(value, hint):
      raise ValueError(f'{name}={value!r}: expected float (finite, or inf for no bound)')
  if not _is(value, hint):
    kind = typing.get_origin(hint) or hint
    want = str(hint) if kind is tuple else getattr(kind, '__name__', str(hint))
    raise ValueError(f'{name}={value!r}: expected {want}' + (' (finite)' if kind is float else ''))
  return value


def _is(value, hint) -> bool:
  kind = typing.get_origin(hint) or hint
  if kind is bool:
    return isinstance(value, bool)
  if kind is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if kind is float:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
  if kind is str:
    return isinstance(value, str)
  if kind is tuple:
    return isinstance(value, tuple) and all(_is(v, typing.get_args(hint)[0]) for v in value)
  return True  # anything else: the dataclass's own checks


def check_ranges(section, where: str = '', **rules: str) -> None:
  """Raises ValueError naming the first field out of range. A rule is '>0',
  '>=0', '>=1' (a count), '>1' (a factor) or '[0,1)', '(0,1]', '[0,1]' (a fraction)."""
  tests = {'>0': lambda v: v > 0, '>=0': lambda v: v >= 0, '>=1': lambda v: v >= 1,
           '>1': lambda v: v > 1,
           '[0,1)': lambda v: 0 <= v < 1, '(0,1]': lambda v: 0 < v <= 1,
           '[0,1]': lambda v: 0 <= v <= 1}
  for field, rule in rules.items():
    value = getattr(section, field) if not isinstance(section, dict) else section[field]
    if value == AUTO:  # fitted later, checked then
      continue
    if not tests[rule](value):
      name = f'{where}.{field}' if where else f'{type(section).__name__}.{field}'
      raise ValueError(f'{name}={value!r} must be {_SAY[rule]}')


_SAY = {'>0': '> 0', '>=0': '≥ 0', '>=1': '≥ 1', '>1': '> 1', '[0,1)': 'in [0, 1)',
        '(0,1]': 'in (0, 1]', '[0,1]': 'in [0, 1]'}


def sections(config: ml_collections.ConfigDict, names) -> dict:
  """The named top-level sections of a config, as one dict for `from_config`."""
  return {name: config[name] for name in names if name in config}


def check_choices(section, choices: dict) -> None:
  """Raises ValueError naming the section's field whose value is not among its choices."""
  for field, allowed in choices.items():
    if getattr(section, field) not in allowed:
      raise ValueError(f'{type(section).__name__}.{field}={getattr(section, field)!r} '
                       f'is not one of {tuple(allowed)}')

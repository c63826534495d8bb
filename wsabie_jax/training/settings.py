"""The config's train and eval sections, field for field (config/schema.py
writes their defaults out and reads them back: the one home of each default)."""
from __future__ import annotations

import dataclasses
import os
from typing import Annotated

import ml_collections

from wsabie_jax.config.schema import (AUTO, MAY_CHANGE, ConfigError, check_choices, check_ranges, check_type,
                                      from_config, marked, to_config)
from wsabie_jax.data import settings as data_settings

PLATFORMS = ('', 'cpu', 'gpu', 'cuda', 'rocm', 'tpu')
PLAN_PACKS = ('auto', 'host', 'device')  # training/dispatch.py
CALL_LENGTHS = ('auto', 'traced', 'static')  # training/dispatch.py


AUTO_EPOCHS = 100  # num_epochs='auto' without a time budget
UNCAPPED = 2**62   # steps: no cap (the budget or patience ends the run)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  # Rows a step (WSABIE: pairs, or images holding positives_per_row pairs);
  # 'auto': fitted to the data's size by the method (configs/wsabie_mulan.py).
  batch_size: Annotated[int, AUTO] = 256
  # WSABIE: a row holds one image and up to this many of its positive pairs,
  # embedded and scored once for all of them (data/batching.PairStream); 1: a pair a row.
  positives_per_row: Annotated[int, AUTO] = 1
  # Epochs to train: a cap with or without a time budget; 0: no cap (the
  # budget or patience ends the run). 'auto', fitted to the budget when the run
  # starts and recorded: AUTO_EPOCHS without one, 0 with max_seconds.
  num_epochs: Annotated[int, AUTO, MAY_CHANGE] = 15
  # > 0 overrides num_epochs
  max_steps: Annotated[int, MAY_CHANGE] = 0
  # > 0: stop on this wall-clock budget
  max_seconds: Annotated[float, MAY_CHANGE] = 0.0
  log_every_steps: Annotated[int, MAY_CHANGE] = 50
  eval_every_steps: Annotated[int, MAY_CHANGE] = 1000
  # > 0 with max_seconds: validate about this many times in the budget,
  # whatever the speed (training/hooks.py ValidationSpacing).
  evals_per_budget: Annotated[int, MAY_CHANGE] = 0
  max_epochs_between_evals: float = 0.0  # > 0: validate at least every this many epochs
  eval_subset: int = 2000       # validation images per evaluation
  # evaluations without improvement before stopping
  patience: Annotated[int, MAY_CHANGE] = 4
  # When patience runs out, up to this many times: back to the best state,
  # every learning rate divided by plateau_factor, patience anew (training/
  # loop.py); then the run stops. 0: it stops the first time.
  plateau_drops: Annotated[int, MAY_CHANGE] = 0
  plateau_factor: float = 4.0
  # After a run that patience ended (early stopping), train a new model on the
  # whole training file, validation split included, along the best state's
  # path (its steps at each rate, scaled to the larger set), and keep it as the
  # run's model (training/refit.py); skipped, with a line, where it would not
  # fit in the time budget left.
  refit: Annotated[bool, MAY_CHANGE] = False
  # With refit and max_seconds: a rate drop only where the budget would still
  # hold the refit after the drop's patience ran out; else the run stops on
  # patience there and refits (training/refit.py Reserve).
  refit_reserved: Annotated[bool, MAY_CHANGE] = True
  checkpoint_every_steps: Annotated[int, MAY_CHANGE] = 2000
  select_metric: str = 'p@1'    # one of the method's validation metrics
  # data parallel over this many devices (0: all)
  num_devices: Annotated[int, MAY_CHANGE] = 0
  # '' the default backend's devices | 'cpu' | 'gpu' | 'tpu'
  platform: Annotated[str, MAY_CHANGE] = ''
  # Steps a dispatch (one lax.fori_loop; training/dispatch.py); 1: one dispatch
  # a step, batches built on the host; 0: the platform's (`for_platform`).
  steps_per_call: Annotated[int, MAY_CHANGE] = 0
  # Threads building a call's streamed batches (data on disk: data/shards.py);
  # 0: the platform's (`for_platform`). The batches do not depend on it.
  input_threads: Annotated[int, MAY_CHANGE] = 0
  # Where a call's packed non-zeros are planned: 'host', 'device', or 'auto'
  # (fitted to the platform and recorded: the host where the devices are CPUs).
  plan_packs: str = 'auto'
  # Resident data: gather (and pack) a call's batches in one pass before its
  # steps instead of one step at a time: one set of small kernels a call, not
  # a step (each costs 36-56 µs of a GPU's step: docs/SCALE.md); the same
  # batches, N of them held at once.
  gather_ahead: Annotated[bool, MAY_CHANGE] = False
  # A call's loop of steps: 'traced' (one program, its length an argument: a
  # while loop whose end the device tells the host each step) or 'static'
  # (full calls a program of known length, short ones the traced); 'auto'
  # fitted to the platform and recorded (training/dispatch.py).
  call_length: Annotated[str, MAY_CHANGE] = 'auto'
  # GPU: XLA's deterministic ops, so a resumed run equals an uninterrupted one
  # bit for bit; repeated rows' scatter-adds then run in a fixed order, many
  # times slower (docs/SCALE.md).
  deterministic: Annotated[bool, MAY_CHANGE] = False
  # > 0: Alg. 1's expected draws per update on this many training pairs at each
  # validation (paper 003 Fig. 1).
  probe_pairs: int = 0
  # > 0: a profiler trace of this many calls of steps, from the second after
  # the run's first validation (or its second call where it validates only at
  # its end), under WORKDIR/profile (training/profile.py).
  profile_calls: Annotated[int, MAY_CHANGE] = 0

  def __post_init__(self):
    check_ranges(self, 'train', batch_size='>=1', positives_per_row='>=1', num_epochs='>=0',
                 max_steps='>=0', max_seconds='>=0', log_every_steps='>=1',
                 eval_every_steps='>=1', evals_per_budget='>=0', max_epochs_between_evals='>=0',
                 eval_subset='>=0', patience='>=1', plateau_drops='>=0', plateau_factor='>1',
                 checkpoint_every_steps='>=1',
                 num_devices='>=0', steps_per_call='>=0', input_threads='>=0',
                 probe_pairs='>=0', profile_calls='>=0')
    check_choices(self, {'platform': PLATFORMS, 'plan_packs': PLAN_PACKS,
                         'call_length': CALL_LENGTHS})
    if not (self.max_steps or self.num_epochs or self.max_seconds):
      raise ValueError('train: num_epochs, max_steps and max_seconds are all 0 (nothing '
                       'would end the run)')


# The settings a run fits to the platform it runs on when its config says 0:
# on a CPU the host is the device, so one thread builds batches and a call of
# 16 steps already costs far more than its dispatch (docs/SCALE.md); an
# accelerator waits on the host between calls, so it takes 64 steps a call
# (the accelerator grid's loop column) and builds streamed batches on the
# host's other cores (a web-scale batch takes ~2 ms on one core: a GPU's step
# takes less).
ON_CPU = {'steps_per_call': 16, 'input_threads': 1}
ON_ACCELERATOR = {'steps_per_call': 64, 'input_threads': 8}


def for_platform(train, platform: str, cpus: int | None = None) -> dict:
  """{field: value} for each of ON_CPU's fields the train section leaves 0, on
  `platform` (a jax device's: 'cpu', 'gpu', 'tpu'); the input threads at
  most the host's other cores (`cpus`, default os.cpu_count())."""
  rules = ON_CPU if platform == 'cpu' else dict(ON_ACCELERATOR)
  if platform != 'cpu':
    rules['input_threads'] = max(1, min(rules['input_threads'], (cpus or os.cpu_count() or 2) - 1))
  return {name: value for name, value in rules.items() if not getattr(train, name)}


def fitted_to_platform(config: ml_collections.ConfigDict, platform: str) -> tuple[
    ml_collections.ConfigDict, dict]:
  """(a copy of config with `for_platform`'s values in place of 0 and the
  train section's 'auto' fields resolved (`resolved`), {'train.field': value}
  of those): config.json records them, so it holds no 'auto' and no 0 that
  the run decided."""
  values = {**for_platform(config.train, platform), **resolved(config.train, platform)}
  if not values:
    return config, {}
  out = ml_collections.ConfigDict(config.to_dict())
  with out.ignore_type():  # ('auto' becomes its value)
    out.train.update(values)
  return out, {f'train.{name}': value for name, value in values.items()}


# A CPU runs a while loop's test on the host anyway, and a second program
# would compile where compiling costs most; a GPU's while loop of a traced
# length waits for its test on the host every step (training/dispatch.py).
CALL_LENGTH_CPU, CALL_LENGTH_ACCELERATOR = 'traced', 'static'


def resolved(train, platform: str) -> dict:
  """{field: value} of the train section's 'auto' fields that the platform and
  the budget decide: plan_packs (the host on a CPU, else the device),
  call_length (CALL_LENGTH_CPU or CALL_LENGTH_ACCELERATOR) and
  num_epochs (AUTO_EPOCHS, or 0, no cap, where max_seconds ends the run)."""
  out = {}
  if train.plan_packs == AUTO:
    out['plan_packs'] = 'host' if platform == 'cpu' else 'device'
  if train.call_length == AUTO:
    out['call_length'] = CALL_LENGTH_CPU if platform == 'cpu' else CALL_LENGTH_ACCELERATOR
  if train.num_epochs == AUTO:
    out['num_epochs'] = epochs_cap(train)
  return out


def epochs_cap(train) -> int:
  """num_epochs, 'auto' read as AUTO_EPOCHS, or 0 (no cap) with max_seconds."""
  if train.num_epochs == AUTO:
    return 0 if train.max_seconds else AUTO_EPOCHS
  return train.num_epochs


def total_steps(train, steps_per_epoch: int) -> int:
  """The steps a run may take: max_steps, else num_epochs' (0: UNCAPPED)."""
  if train.max_steps:
    return train.max_steps
  epochs = epochs_cap(train)
  return epochs * steps_per_epoch if epochs else UNCAPPED


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  ks: tuple[int, ...] = (1, 5, 10)  # p@k, r@k, psib@k
  f1_k: int = 5                 # F1 of the top f1_k labels
  batch_size: Annotated[int, MAY_CHANGE] = 256  # images scored at once
  # labels scored at once (memory O(batch_size·label_chunk))
  label_chunk: Annotated[int, MAY_CHANGE] = 4096

  def __post_init__(self):
    check_ranges(self, 'eval', f1_k='>=1', batch_size='>=1', label_chunk='>=1')
    if not self.ks or min(self.ks) < 1:
      raise ValueError(f'eval.ks={self.ks} must be positive ranks')


SHARED = {'train': TrainConfig, 'eval': EvalConfig}
# The fields a resumed run may change (training/workdir.py checks the others).
MAY_CHANGE_FIELDS = marked(TrainConfig, MAY_CHANGE, 'train') | marked(EvalConfig, MAY_CHANGE, 'eval')


def train(**overrides) -> ml_collections.ConfigDict:
  return to_config(TrainConfig, **overrides)


def evaluation(**overrides) -> ml_collections.ConfigDict:
  return to_config(EvalConfig, **overrides)


def assemble(method: str, method_sections: ml_collections.ConfigDict,
             data: ml_collections.ConfigDict | None = None, seed: int = 0,
             **sections) -> ml_collections.ConfigDict:
  """A whole config: the method's sections, data (the synthetic default when
  None), train and eval (defaults unless given), and any further sections (a
  method's own, e.g. `words`)."""
  c = ml_collections.ConfigDict()
  c.method = method
  c.seed = seed
  c.data = data if data is not None else data_settings.synthetic_data()
  for name, section in method_sections.items():
    c[name] = section
  c.train = sections.pop('train', None) or train()
  c.eval = sections.pop('eval', None) or evaluation()
  for name, section in sections.items():
    c[name] = section
  return c


def check_shared(config: ml_collections.ConfigDict) -> dict:
  """config.train, .eval and .data read by their dataclasses ({name: instance};
  a section the config lacks: its defaults); ConfigError on the first bad
  field, config.seed's included."""
  try:
    seed = config.seed if 'seed' in config else 0
    check_type('config.seed', seed, int)
    check_ranges({'seed': seed}, 'config', seed='>=0')  # (numpy's RNGs)
    typed = {name: from_config(cls, config[name] if name in config else {}, f'config.{name}')
             for name, cls in SHARED.items()}
    return {**typed, 'data': data_settings.of(config.data if 'data' in config else {})}
  except ValueError as error:
    raise ConfigError(str(error)) from None


def complete(config: ml_collections.ConfigDict, sections: dict) -> ml_collections.ConfigDict:
  """`config` (in place) with each section's fields written from its checked
  dataclass ({name: instance}: check_shared's and the method's): the defaults
  fill what a hand-made config leaves out, so nothing downstream needs a
  fallback, and a `--config.train.batch_size=512` override of an 'auto' field
  is the int 512."""
  with config.unlocked(), config.ignore_type():
    if 'seed' not in config:
      config.seed = 0
    for name, values in sections.items():
      if name not in config:
        config[name] = ml_collections.ConfigDict()
      _write(config[name], dataclasses.asdict(values))
  return config


def _write(section: ml_collections.ConfigDict, fields: dict) -> None:
  for key, value in fields.items():
    if isinstance(value, dict):
      if key not in section:
        section[key] = ml_collections.ConfigDict()
      _write(section[key], value)
    elif key not in section or section[key] != value or type(section[key]) is not type(value):
      section[key] = value


def check_fitted(config: ml_collections.ConfigDict, method: str) -> None:
  """Raises ConfigError naming a shared field still 'auto' after the method was
  built (a method that fits no values to the data)."""
  for name in ('batch_size', 'positives_per_row'):
    if config.train[name] == AUTO:
      raise ConfigError(f"config.train.{name}='auto': method {method!r} fits no values to the "
                        'data; give a number')

"""The `tables` suite (launch/benchmark.py --suite=tables): the WSABIE step with
its tables read by gathered rows against read whole by matmuls (wsabie/table_reads.py),
on the panel's real data and on a synthetic grid around 'by_size''s rule.

Times are of the step alone, `STEPS` steps a dispatch as the training loop
runs them (a scan over real batches of the data), after compilation.
"""
from __future__ import annotations

import dataclasses
import functools
import time

import jax
import numpy as np

from wsabie_jax.data import batching, load_splits, synthetic
from wsabie_jax.benchmarks import panel
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.wsabie import table_reads

STEPS = 16  # a call's steps, scanned


def scanned_call(cfg: step_lib.StepConfig, stream, num_features: int, state=None,
                 anew: bool = False):
  """(call, state, batches): STEPS steps scanned in one jitted call, the
  stream's first STEPS batches, and `state` (default a fresh one). The call
  is one function a config, compiled once for every measurement of it, unless
  `anew`: a call traced afresh, for a step compiled under a switch its trace
  reads (step_profile.paired's 'off' arm: jit's own cache would hand back the
  program traced without it)."""
  batches = _batches(stream, 0)
  call = _scanned.__wrapped__(cfg) if anew else _scanned(cfg)  # (the cache bypassed)
  if state is None:
    state = step_lib.init_state(jax.random.PRNGKey(0), num_features, cfg)
  return call, state, batches


@functools.lru_cache(maxsize=16)
def _scanned(cfg: step_lib.StepConfig):
  return jax.jit(lambda state, b: jax.lax.scan(
      lambda s, x: step_lib.train_step(cfg, s, x), state, b), donate_argnums=0)


def _batches(stream, first: int):
  """The stream's batches first … first + STEPS − 1, stacked, on the device."""
  return jax.device_put(jax.tree.map(lambda *x: np.stack(x),
                                     *[stream.batch(s) for s in range(first, first + STEPS)]))


def trained_state(cfg: step_lib.StepConfig, stream, num_features: int, steps: int):
  """(a state after `steps` steps over the stream's batches from its first,
  their mean violator rate over the last STEPS): a model that fits, whose
  pairs mostly draw no violator (the end of a run, not its start). One call
  compiled, fed the next STEPS batches each time."""
  call, state, _ = scanned_call(cfg, stream, num_features)
  rate = float('nan')
  for first in range(0, steps, STEPS):
    state, stats = call(state, _batches(stream, first))
    rate = float(np.sum(stats['violator_found']) / max(np.sum(stats['pairs']), 1))
  return state, rate


def seconds_per_step(cfg: step_lib.StepConfig, stream, num_features: int,
                     seconds: float = 1.5, state=None) -> float:
  """The step on the stream's first STEPS batches, repeated for `seconds`,
  from `state` (default a fresh one)."""
  call, state, batches = scanned_call(cfg, stream, num_features, state)
  for _ in range(2):
    state, _ = call(state, batches)
  jax.block_until_ready(state)
  calls, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    state, _ = call(state, batches)
    calls += 1
  jax.block_until_ready(state)
  return (time.perf_counter() - start) / (calls * STEPS)


def _reading(cfg: step_lib.StepConfig, kind: str) -> step_lib.StepConfig:
  return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, tables=kind))


def on_data(specs, config_path: str = 'configs/wsabie_mulan.py', seconds: float = 1.5) -> list[dict]:
  """Each panel set with its config's B, Q and K: ms/step with rows, with what
  'by_size' picks, and with both tables whole."""
  rows = []
  for spec in specs:
    name, data = panel.data_config(spec)
    data = panel.with_valid(data, panel.VALID_FRACTION)  # fitted as the panel's runs are
    cfg, B, config = panel.ours_settings(config_path, data, load_splits(data)[0])
    train = load_splits(config.data)[0]  # with the config's normalisation and bias feature
    Q = config.train.positives_per_row
    stream = batching.PairStream(train, B, 0, positives_per_row=Q)
    slots = stream.batch(0).feat_idx_SxN.size
    by_size = table_reads.choose(cfg, B, Q, slots, train.num_features)
    ms = {k: 1e3 * seconds_per_step(_reading(cfg, kind), stream, train.num_features, seconds)
          for k, kind in (('rows', 'rows'), ('by_size', 'by_size'), ('both', 'whole'))}
    pairs = B * stream.pairs_per_row
    rows.append({'set': name, 'Y': train.num_labels, 'd': train.num_features, 'B': B, 'Q': Q,
                 'K': cfg.loss.num_draws, 'slots': slots, 'by_size': by_size._asdict(),
                 **{f'ms_{k}': v for k, v in ms.items()},
                 **{f'pairs_per_sec_{k}': pairs / v * 1e3 for k, v in ms.items()}})
  print('\nWSABIE step: gathered rows vs tables read whole (ms/step, scanned; D from the config)')
  print(f'{"set":<12} {"Y":>5} {"d":>5} {"B":>5} {"Q":>3} {"K":>4} {"by_size: whole":<17} '
        f'{"rows":>7} {"by_size":>7} {"both":>7} {"rows÷size":>9} {"pairs/s size":>12}')
  for r in rows:
    picked = '+'.join(k for k, v in r['by_size'].items() if v) or '-'
    print(f'{r["set"]:<12} {r["Y"]:>5} {r["d"]:>5} {r["B"]:>5} {r["Q"]:>3} {r["K"]:>4} {picked:<17} '
          f'{r["ms_rows"]:>7.2f} {r["ms_by_size"]:>7.2f} {r["ms_both"]:>7.2f} '
          f'{r["ms_rows"] / r["ms_by_size"]:>9.2f} {r["pairs_per_sec_by_size"]:>12,.0f}')
  return rows


def grid(small: bool = False, seconds: float = 1.5) -> list[dict]:
  """Synthetic data around the rule: one table read whole at a time (D 128)."""
  B, D = (64, 16) if small else (512, 128)
  base = step_lib.StepConfig(0, model=step_lib.ModelConfig(dim=D, max_norm=3.0),
                             loss=step_lib.LossConfig(violators='all', rank_estimate='violator_count'),
                             optim=step_lib.OptimConfig(learning_rate=0.01))
  cases = ([('labels', Y, K, 300, 10) for K in (10, 100) for Y in (50, 100, 300, 1000, 3000, 10_000)]
           + [('features', 20, 5, d, nnz) for nnz in (10, 100) for d in (100, 300, 1000, 3000, 10_000)])
  if small:
    cases = cases[:2] + cases[-2:]
  rows = []
  for side, Y, K, d, nnz in cases:
    cfg = dataclasses.replace(base, num_labels=Y, loss=dataclasses.replace(base.loss, num_draws=min(K, Y - 1)))
    stream = batching.PairStream(
        synthetic.generate(synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=nnz), 4 * B), B, 0)
    slots = stream.batch(0).feat_idx_SxN.size
    rows_ms, whole_ms = (1e3 * seconds_per_step(_reading(cfg, kind), stream, d, seconds)
                         for kind in ('rows', side))
    rows.append({'side': side, 'Y': Y, 'K': cfg.loss.num_draws, 'd': d, 'nnz': nnz, 'B': B,
                 'ms_rows': rows_ms, 'ms_whole': whole_ms,
                 'by_size_whole': getattr(table_reads.choose(cfg, B, 1, slots, d), side)})
  print(f'\nOne table read whole vs gathered rows, synthetic (B {B}, D {D}; ms/step)')
  print(f'{"side":<9} {"Y":>6} {"K":>4} {"d":>6} {"nnz":>4} {"rows":>7} {"whole":>7} '
        f'{"rows÷whole":>10} {"by_size":>7}')
  for r in rows:
    print(f'{r["side"]:<9} {r["Y"]:>6} {r["K"]:>4} {r["d"]:>6} {r["nnz"]:>4} {r["ms_rows"]:>7.2f} '
          f'{r["ms_whole"]:>7.2f} {r["ms_rows"] / r["ms_whole"]:>10.2f} '
          f'{"whole" if r["by_size_whole"] else "rows":>7}')
  return rows

"""Where a WSABIE step's time goes (launch/benchmark.py --suite=profile): on
each --panel set with --panel_config's fitted B, Q and K, the step's ms, its
pairs/s, the multiply-adds it does a second beside this machine's rate on a
plain matmul, and XLA's kernels ranked by their time in a profiler trace; from a fresh
model and from one trained TRAINED_STEPS steps.

The step's multiply-adds are counted as 3·(B·(K + Q) + N)·D: the scores of
each row's K draws and Q positives and the embedding of its N packed
non-zeros, forward, and twice that backward (the gradients of the image and
of the rows).

Where the native row kernel is built (core/native_rows.py), each phase also
times the step with it against XLA's form of the same scatters, compiled in
one process and run in alternating rounds (`native_vs_xla`): the two arms'
median ms and their paired ratio, so the kernel's gain is read on one
machine state, not across runs. Likewise the step's sums over comparisons
made in slices against one reduction each (`slices_vs_reduction`,
core/lane_sums.py).
"""
from __future__ import annotations

import collections
import contextlib
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.benchmarks import gather_vs_whole, panel
from wsabie_jax.core import lane_sums, native_rows
from wsabie_jax.data import batching, load_splits
from wsabie_jax.training import profile

TOP = 12  # kernels listed a set
# The second profile's state has trained this many steps: most of its pairs
# draw no violator, as at a run's end (the small_text stand-in: 3–10% after
# 1,000 steps of B 512), where a step skips the zero gradients' pieces
# (core/row_optim.update_live).
TRAINED_STEPS = 1024
AB_ROUNDS = 12  # native_vs_xla's rounds, each 3 calls of an arm


def native_vs_xla(cfg, stream, num_features: int, state=None,
                  rounds: int = AB_ROUNDS) -> dict | None:
  """The step with the native row kernel and with XLA's form (`paired`);
  None where the kernel is not built."""
  if not native_rows.available():
    return None
  ab = paired(cfg, stream, num_features, state, rounds, native_rows.turned_off)
  return {'native_ms': ab.pop('on_ms'), 'xla_ms': ab.pop('off_ms'), **ab}


def slices_vs_reduction(cfg, stream, num_features: int, state=None,
                        rounds: int = AB_ROUNDS) -> dict:
  """The step with its sums over comparisons made in slices on the CPU
  (core/lane_sums.py) and as one reduction each (`paired`)."""
  ab = paired(cfg, stream, num_features, state, rounds, lane_sums.turned_off)
  return {'slices_ms': ab.pop('on_ms'), 'reduction_ms': ab.pop('off_ms'), **ab}


def paired(cfg, stream, num_features: int, state, rounds: int, turned_off) -> dict:
  """The step as it is ('on') and compiled inside `turned_off()` ('off'),
  from `state` (default a fresh one; each arm trains on from its own copy),
  in alternating rounds of 3 calls: {'on_ms', 'off_ms' (medians), 'ratio'
  (the median of the rounds' on ÷ off), 'ratio_iqr'}."""
  arms = {}
  for arm in ('off', 'on'):
    copy = None if state is None else jax.tree.map(jnp.copy, state)
    with turned_off() if arm == 'off' else contextlib.nullcontext():
      call, copy, batches = gather_vs_whole.scanned_call(cfg, stream, num_features, copy,
                                                         anew=arm == 'off')
      copy, _ = call(copy, batches)  # ('off' compiled here, under its switch; 'on' where not yet)
    arms[arm] = [call, jax.block_until_ready(copy), batches]
  seconds = {arm: [] for arm in arms}
  for _ in range(rounds):
    for arm, held in arms.items():
      call, copy, batches = held
      start = time.perf_counter()
      for _ in range(3):
        copy, _ = call(copy, batches)
      held[1] = jax.block_until_ready(copy)
      seconds[arm].append((time.perf_counter() - start) / (3 * gather_vs_whole.STEPS))
  off, on = np.asarray(seconds['off']), np.asarray(seconds['on'])
  ratio = on / off
  return {'on_ms': float(np.median(on) * 1e3), 'off_ms': float(np.median(off) * 1e3),
          'ratio': float(np.median(ratio)),
          'ratio_iqr': [float(np.percentile(ratio, 25)), float(np.percentile(ratio, 75))]}


def matmul_rate(seconds: float = 1.0) -> float:
  """Multiply-adds a second of a 512×128 by 128×4096 float32 matmul."""
  f = jax.jit(lambda a, b: a @ b)
  a, b = jnp.ones((512, 128)), jnp.ones((128, 4096))
  f(a, b).block_until_ready()
  calls, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    out = f(a, b)
    calls += 1
  out.block_until_ready()
  return calls * 512 * 128 * 4096 / (time.perf_counter() - start)


def kernels(cfg, stream, num_features: int, calls: int = 5,
            state=None) -> list[tuple[str, float, str]]:
  """(kernel, ms a step, what it computes) of a traced call of STEPS steps
  from `state` (default a fresh one), most costly first."""
  steps = gather_vs_whole.STEPS
  call, state, batches = gather_vs_whole.scanned_call(cfg, stream, num_features, state)
  compiled = call.lower(state, batches).compile()  # (its text names the trace's kernels)
  hlo = compiled.as_text()
  state, _ = compiled(state, batches)
  jax.block_until_ready(state)
  with tempfile.TemporaryDirectory() as folder:
    with jax.profiler.trace(folder):
      for _ in range(calls):
        state, _ = compiled(state, batches)
      jax.block_until_ready(state)
    events = profile.trace_events(folder)
  ops = _ops_of(hlo)
  micros = collections.Counter()
  for e in events:
    if e.get('ph') == 'X' and e['name'] in ops:
      micros[e['name']] += e.get('dur', 0)
  return [(name, us / 1e3 / (calls * steps), ops[name]) for name, us in micros.most_common(TOP)]


def _ops_of(hlo: str) -> dict[str, str]:
  """{instruction: its source op and output shape} of every line of XLA's
  text (`%name = SHAPE op(…), metadata={op_name="…/op"}`): a trace's events
  are matched against it by name, one lookup each (a search of the whole text
  an event took seconds a traced call)."""
  ops = {}
  for line in hlo.splitlines():
    line = line.lstrip().removeprefix('ROOT ')
    if not line.startswith('%') or ' = ' not in line:
      continue
    name, rest = line[1:].split(' = ', 1)
    op = line.split('op_name="', 1)[1].split('"', 1)[0].split('/')[-1] if 'op_name="' in line \
        else ''
    ops[name] = f'{op} {rest.split(" ", 1)[0]}'
  return ops


def run(specs, config_path: str = panel.DEFAULT_CONFIG, seconds: float = 1.5,
        overrides: dict | None = None, trained_steps: int = TRAINED_STEPS,
        ab_rounds: int = AB_ROUNDS) -> list[dict]:
  rate = matmul_rate(seconds)
  print(f'\nthis machine: {rate / 1e9:.1f} G multiply-adds/s on a 512×128×4096 matmul')
  rows = []
  for spec in specs:
    name, data = panel.data_config(spec)
    # Fitted as the panel's runs are: to the training file less its validation split.
    data = panel.with_valid(data, panel.VALID_FRACTION)
    cfg, B, config = panel.ours_settings(config_path, data, load_splits(data)[0], overrides)
    train = load_splits(config.data)[0]
    stream = batching.PairStream(train, B, 0, positives_per_row=config.train.positives_per_row)
    slots = stream.batch(0).feat_idx_SxN.size
    K, Q, D = cfg.loss.num_draws, config.train.positives_per_row, cfg.model.dim
    madds = 3 * (B * (K + Q) + slots) * D
    pairs = B * stream.pairs_per_row
    print(f'\n{name}: B {B}, Q {Q}, K {K}, D {D}, {slots:,} non-zero slots a step')
    trained, violator_rate = gather_vs_whole.trained_state(cfg, stream, train.num_features,
                                                           trained_steps)
    for phase, state in (('fresh', None), ('trained', trained)):
      copy = lambda: state if state is None else jax.tree.map(jnp.copy, state)  # (calls donate it)
      step_s = gather_vs_whole.seconds_per_step(cfg, stream, train.num_features, seconds, copy())
      top = kernels(cfg, stream, train.num_features, state=copy())
      ab = native_vs_xla(cfg, stream, train.num_features, state, ab_rounds)
      sums = slices_vs_reduction(cfg, stream, train.num_features, state, ab_rounds)
      rows.append({'set': name, 'phase': phase, 'B': B, 'Q': Q, 'K': K, 'D': D, 'slots': slots,
                   'violator_rate': None if state is None else violator_rate,
                   'ms_per_step': step_s * 1e3, 'pairs_per_sec': pairs / step_s,
                   'madds_per_sec': madds / step_s, 'matmul_madds_per_sec': rate,
                   'native_vs_xla': ab, 'slices_vs_reduction': sums,
                   'kernels': [{'kernel': k, 'ms': ms, 'op': op} for k, ms, op in top]})
      where = ('a fresh model' if state is None else
               f'after {trained_steps:,} steps (violator rate {violator_rate:.1%})')
      print(f'  from {where}: {step_s * 1e3:.2f} ms a step, {pairs / step_s:,.0f} pairs/s, '
            f'{madds / step_s / 1e9:.2f} G multiply-adds/s ({madds / step_s / rate:.0%} of the matmul)')
      for k, ms, op in top:
        print(f'    {ms:7.3f} ms  {k:<32} {op}')
      if ab is not None:
        print(f'    the native row kernel against XLA\'s form: {ab["native_ms"]:.2f} against '
              f'{ab["xla_ms"]:.2f} ms a step (medians), paired ratio {ab["ratio"]:.2f} '
              f'(interquartile {ab["ratio_iqr"][0]:.2f}–{ab["ratio_iqr"][1]:.2f})')
      print(f'    sums in slices against one reduction each: {sums["slices_ms"]:.2f} against '
            f'{sums["reduction_ms"]:.2f} ms a step (medians), paired ratio {sums["ratio"]:.2f} '
            f'(interquartile {sums["ratio_iqr"][0]:.2f}–{sums["ratio_iqr"][1]:.2f})')
  return rows

"""A profiler trace of a few calls of steps (train.profile_calls): where a
device's time goes in the run as it trains, not in a benchmark's copy of it.

The trace starts after the call that follows the run's first validation (by
then the step, its checks and validation have compiled: traced from the
second call on, the Mulan config's window on Corel5k was half compiling,
0.53 s of 1.06), or after the first call (which compiles) of a run that
validates only at its end. It covers `calls` calls, their hooks and the
boundaries between them (validation, checkpoint), and stops once the last
traced call's state is computed. Process 0 (the workdir's one writer) writes
it under WORKDIR/profile in JAX's profiler format, for XProf (`pip install
xprof`, `xprof --logdir WORKDIR/profile`; or TensorBoard's profile tab) or
ui.perfetto.dev (its *.trace.json.gz), and logs what it shows (`summary`).

Each call is a step of the trace named 'train', its step number the call's
first step (XProf's step-time view reads them: training/dispatch.py); the
loop's own ranges are named 'input', 'validate' and 'checkpoint'. Both are
always on (1.2 µs a call untraced), so a trace taken from outside,
`jax.profiler.trace` around a notebook's run, shows them too. Starting,
writing and reading the trace count in the wall-clock budget, as a
checkpoint does, not in the steps' time (pairs/s); the traced calls count
in both, a little slower than untraced ones.
"""
from __future__ import annotations

import gzip
import json
import logging
import pathlib

import jax

from wsabie_jax.training import hosts
from wsabie_jax.training.recorder import Clock

log = logging.getLogger('wsabie_jax')

FOLDER = 'profile'  # under the workdir
CPU_PROGRAM = 'ThunkExecutor::Execute'  # XLA:CPU running a program's thunks (`summary`)


class CallTrace:
  """A hook (`after(call)`, training/hooks.py) that starts the trace after a
  call once `spacing` (hooks.ValidationSpacing) has validated, or after the
  first call where it validates only at the run's end (step `total`), and
  stops it after `calls` calls."""

  def __init__(self, calls: int, workdir, clock: Clock, spacing, total: int):
    self.folder = pathlib.Path(workdir) / FOLDER
    self.clock, self.spacing, self.total = clock, spacing, total
    self._left = calls if hosts.is_writer() else 0
    self._steps = None         # (first, last) step traced
    self._tracing = False

  def after(self, call) -> None:
    if self._tracing:
      first = self._steps[0] if self._steps else call.step - call.done
      self._steps = (first, call.step - 1)
      self._left -= 1
      if not self._left:
        self.stop(call.state)
    elif self._left and (self.spacing.validations or self.spacing.every >= self.total):
      with self.clock.excluded():
        try:
          jax.profiler.start_trace(str(self.folder))
        except RuntimeError as busy:  # (JAX takes one trace at a time)
          log.warning('train.profile_calls=%d: no trace of its own, another is running (%s)',
                      self._left, busy)
          self._left = 0
          return
      self._tracing = True

  def stop(self, state=None) -> None:
    """Ends the trace (once `state` is computed) and says where it is and
    what it shows (`summary`); a run that ends first ends it here too (the
    loop's `finally`)."""
    if not self._tracing:
      return
    self._tracing, self._left = False, 0
    with self.clock.excluded():
      if state is not None:
        jax.block_until_ready(state)
      jax.profiler.stop_trace()
      if self._steps:
        log.info('profile: steps %d-%d traced into %s (xprof --logdir, or ui.perfetto.dev: the '
                 '.trace.json.gz)%s', *self._steps, self.folder, self._shown())

  def _shown(self) -> str:
    """`summary`'s figures for the log ('' where this JAX writes no trace it reads)."""
    try:
      seen = summary(self.folder)
    except (FileNotFoundError, ValueError):
      return ''
    busy = seen['device_busy']
    calls = f"{seen['calls']} call{'s' if seen['calls'] != 1 else ''}"
    return (f": {calls} in {seen['window_ms']:.1f} ms, the device busy for "
            f"{'an unknown share' if busy is None else format(busy, '.2f')} of it, "
            f"{seen['input_ms']:.1f} ms waiting for input")


def named(name: str):
  """A named range of the loop's host work in any trace taken meanwhile."""
  return jax.profiler.TraceAnnotation(name)


def call_named(first_step: int):
  """A call of steps, named 'train' at its first step, in any trace taken meanwhile."""
  return jax.profiler.StepTraceAnnotation('train', step_num=first_step)


def summary(folder) -> dict:
  """What the newest trace under `folder` says of its calls: how many, the
  milliseconds from the first call's dispatch to the last thing its calls
  ran ('window_ms'), the host's dispatching and waiting for input in it
  ('dispatch_ms', 'input_ms'), and the share of the window the device had
  work ('device_busy': the union of the events on the trace's /device:
  processes, which a GPU or TPU trace has; on a CPU, whose programs run on
  the host's threads, of XLA's runtime executing one, CPU_PROGRAM; None
  where neither is found). A device busy for 0.6 of the window lost 0.4 of
  it between its programs: what the loop costs there (docs/SCALE.md)."""
  events = trace_events(folder)
  processes = {e['pid']: e['args']['name'] for e in events
               if e.get('ph') == 'M' and e.get('name') == 'process_name'}
  spans = [e for e in events if e.get('ph') == 'X']
  calls = [e for e in spans if e['name'] == 'train']
  if not calls:
    raise ValueError(f'{folder}: the trace holds no call of steps (no event named "train")')
  start = min(e['ts'] for e in calls)
  on_device = [e for e in spans if '/device:' in processes.get(e['pid'], '')] or [
      e for e in spans if e['name'] == CPU_PROGRAM]
  device = [(max(e['ts'], start), e['ts'] + e['dur']) for e in on_device
            if e['ts'] + e['dur'] > start]
  end = max([e['ts'] + e['dur'] for e in calls] + [b for _, b in device])
  inputs = [e['dur'] for e in spans if e['name'] == 'input' and start <= e['ts'] < end]
  return {'calls': len(calls), 'window_ms': (end - start) / 1e3,
          'dispatch_ms': sum(e['dur'] for e in calls) / 1e3, 'input_ms': sum(inputs) / 1e3,
          'device_busy': _covered(device) / (end - start) if device else None}


def _covered(intervals) -> float:
  """The length of the union of (begin, end) intervals."""
  total, reach = 0.0, float('-inf')
  for begin, end in sorted(intervals):
    if end > reach:
      total += end - max(begin, reach)
      reach = end
  return total


def trace_events(folder) -> list[dict]:
  """The events of the newest Chrome-format trace (*.trace.json.gz) under `folder`."""
  files = sorted(pathlib.Path(folder).rglob('*.trace.json.gz'), key=lambda f: f.stat().st_mtime)
  if not files:
    raise FileNotFoundError(f'{folder}: no profiler trace (*.trace.json.gz) here')
  return json.loads(gzip.decompress(files[-1].read_bytes()))['traceEvents']

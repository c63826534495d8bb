"""The loop's bookkeeping: a clock for time budgets and examples/s, and a
recorder for validation history, the best step, early stopping and summaries."""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import gc
import json
import logging
import math
import pathlib
import time

import jax

from wsabie_jax.training import workdir as workdir_lib

log = logging.getLogger('wsabie_jax')


@contextlib.contextmanager
def objects_frozen():
  """Keeps Python's full collections off the objects alive when training
  starts (gc.freeze; handed back after). A full pass scans every object the
  process holds, JAX's traced functions and caches included, so one landing
  in a short run's steps reads as a slower run (the training loop;
  benchmarks/timed.py).
  Objects the loop itself leaves are collected as before. Left alone where
  the caller has frozen objects already: unfreezing would hand back theirs."""
  if gc.get_freeze_count():
    yield
    return
  gc.freeze()
  try:
    yield
  finally:
    gc.unfreeze()


def now() -> float:
  """The training clock's reading in seconds (time.perf_counter). Module-level
  so that tests replace it with a fake that advances a fixed amount a read:
  a time-budgeted run then takes the same steps on any machine."""
  return time.perf_counter()


class Clock:
  """Training time, split into the steps' time and the rest (compilation,
  validation, checkpoints), summed over resumed runs.

  `steps_seconds` is what examples/s divides by; `seconds` is wall-clock, what
  `train.max_seconds` budgets.
  """

  def __init__(self, prior_seconds: float = 0.0, prior_step_seconds: float = 0.0):
    self.prior, self.prior_steps = prior_seconds, prior_step_seconds
    self.start = now()
    self.overhead = 0.0

  @property
  def seconds(self) -> float:
    return self.prior + now() - self.start

  @property
  def step_seconds(self) -> float:
    return self.prior_steps + now() - self.start - self.overhead

  def leave_out(self, seconds: float) -> None:
    """Seconds already spent that do not count as step time."""
    self.overhead += seconds

  def excluded(self):
    """A context in which time does not count as step time."""
    clock = self

    class _Excluded:
      def __enter__(self):
        self.t0 = now()

      def __exit__(self, *exc):
        clock.overhead += now() - self.t0

    return _Excluded()


class Summaries:
  """TensorBoard scalars under workdir/tensorboard (tensorboardX: no TensorFlow
  needed). A call's scalars go as one event: one event a scalar multiplies
  the writer thread's work, which competes with the steps. One writer: process 0 (the others' are no-ops;
  every process computes the same values)."""

  def __init__(self, workdir):
    self.writer = None
    if jax.process_index() != 0:
      return
    from tensorboardX import FileWriter
    from tensorboardX.proto.summary_pb2 import Summary
    self.writer, self._summary = FileWriter(str(pathlib.Path(workdir) / 'tensorboard')), Summary

  def scalars(self, step: int, values: dict, prefix: str):
    if self.writer is None:
      return
    scalars = [self._summary.Value(tag=f'{prefix}/{name}', simple_value=float(value))
               for name, value in values.items() if isinstance(value, (int, float))]
    if scalars:
      self.writer.add_summary(self._summary(value=scalars), global_step=step)

  def close(self):
    if self.writer is not None:
      self.writer.close()


class Stop(str, enum.Enum):
  """Why a run stopped: a call's `stop` (hooks.py), the record's `stopped`
  and metrics.json's (a str, as JSON keeps it)."""
  NONE = ''                       # it goes on
  MAX_SECONDS = 'max_seconds'     # the time budget (train.max_seconds)
  EARLY_STOPPING = 'early_stopping'  # patience ran out, no rate drop left
  INTERRUPTED = 'interrupted'     # a signal: saved, to resume


@dataclasses.dataclass
class RunRecord:
  """The loop's state beside the model's, saved as JSON with every
  checkpoint so that a resumed run goes on where it was."""
  best_metric: float              # the best validation of the selected metric so far
  best_step: int = -1
  evals_without_improvement: int = 0  # patience used
  train_seconds: float = 0.0      # the run's time, compilation and validation included
  step_seconds: float = 0.0       # its steps' alone
  stopped: str = Stop.NONE        # why it ended ('' while it goes on)
  rate_drops: int = 0             # plateau drops so far (loop.at_rate)
  # The state's path as [rate drops, steps] segments (train.refit replays the
  # best's): the current state's closed segments, the step its open one began
  # at (a rate drop starts one), and the best state's whole path.
  path: list = dataclasses.field(default_factory=list)
  path_start: int = 0
  best_path: list = dataclasses.field(default_factory=list)
  refit_steps: int = 0            # the refit model's steps (training/refit.py); 0: none
  eval_every_steps: int | None = None  # the interval fitted to a budget (hooks.ValidationSpacing)
  evals_below_baseline: int = 0   # validations in a row under the frequency baseline
  input_wait_seconds: float = 0.0  # the loop's wait for its calls' input (dispatch.py)
  data_position: dict | None = None  # the stream's place at the checkpoint (epoch, …)
  identity: dict | None = None    # what the run was trained on (identity.of_run)

  @classmethod
  def of(cls, saved: dict) -> 'RunRecord':
    """From a checkpoint's JSON; a field an older run's record lacks takes its
    default, one this version no longer keeps is dropped."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in saved.items() if k in names})

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


class Recorder:
  """Validation results: history.jsonl, summaries, the best metric and patience.

  `record` (RunRecord) is saved with each checkpoint, so a resumed run keeps
  its best metric, patience count and times.
  """

  def __init__(self, workdir, metric: str, patience: int, summaries: Summaries,
               record: dict | None = None):
    self.workdir, self.metric, self.patience, self.summaries = pathlib.Path(workdir), metric, \
        patience, summaries
    # Mean ranks are better lower (paper 002 selects on validation mean rank).
    self.sign = -1.0 if metric.endswith('mean_rank') else 1.0
    self.record = (RunRecord.of(record) if record
                   else RunRecord(best_metric=-self.sign * math.inf))

  def validation(self, step: int, values: dict, step_seconds: float) -> bool:
    """Logs one validation; True when it is the best so far."""
    self.summaries.scalars(step, values, 'valid')
    if jax.process_index() == 0:
      path = self.workdir / 'history.jsonl'
      try:
        with open(path, 'a') as f:
          f.write(json.dumps({'step': step, 'step_seconds': step_seconds, **values}) + '\n')
      except OSError as error:  # (a full disk: name the file)
        raise OSError(error.errno, error.strerror, str(path)) from None
    r = self.record
    self._track_baseline(step, values)
    if self.sign * values[self.metric] > self.sign * r.best_metric:
      r.best_metric, r.best_step, r.evals_without_improvement = values[self.metric], step, 0
      r.best_path = r.path + [[r.rate_drops, step - r.path_start]]
      return True
    r.evals_without_improvement += 1
    return False

  def forget_after(self, step: int):
    """Drops history.jsonl lines past `step` (a resumed run validates them again)."""
    path = self.workdir / 'history.jsonl'
    if jax.process_index() != 0 or not path.exists():
      return
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if _step_of(line) <= step]
    if len(kept) != len(lines):
      workdir_lib.write_file(path, ''.join(kept))

  @property
  def out_of_patience(self) -> bool:
    return self.record.evals_without_improvement >= self.patience

  # Worse than always predicting the most frequent labels for this many
  # validations in a row: the run is diverging (or learning nothing).
  BELOW_BASELINE_WARN = 3

  def _track_baseline(self, step: int, values: dict):
    base = values.get(f'freq_{self.metric}')
    if base is None:
      return
    below = self.sign * values[self.metric] < self.sign * base
    count = self.record.evals_below_baseline + 1 if below else 0
    self.record.evals_below_baseline = count
    if count == self.BELOW_BASELINE_WARN:
      log.warning('step %d: valid %s %.4f has been below the frequency baseline (%.4f) for %d '
                  'validations: the run is diverging or learning nothing; try a lower '
                  'learning rate', step, self.metric, values[self.metric], base, count)

  def warn_if_below_baseline(self, result: dict, split: str):
    base = result.get(f'freq_{self.metric}')
    if base is not None and self.sign * result[self.metric] < self.sign * base:
      log.warning('%s %s %.4f is below the frequency baseline (%.4f): the model is worse than '
                  'predicting the most frequent labels', split, self.metric, result[self.metric],
                  base)


def _step_of(line: str) -> float:
  """A history line's step; a line cut short by a kill counts as past every step."""
  try:
    return json.loads(line)['step']
  except (json.JSONDecodeError, KeyError, TypeError):
    return float('inf')


def read_stats(stats: dict) -> dict:
  """A step's summed stats → per-pair loss, violator rate, draws per update."""
  s = jax.device_get(stats)
  pairs = max(int(s['pairs']), 1)
  out = {'loss': float(s['loss']) / pairs}
  if 'input_wait_seconds' in s:  # (the loop's wait for the call's input: dispatch.py)
    out['input_wait_ms'] = 1e3 * float(s['input_wait_seconds'])
  if 'violator_found' in s:
    found = int(s['violator_found'])
    out['violator_rate'] = found / pairs
    if 'draws_to_violator' in s:  # (the exact rank draws nothing)
      out['draws_per_update'] = float(s['draws_to_violator']) / max(found, 1)
  return out

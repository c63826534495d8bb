"""train.refit: the run's model trained again on the whole training file.

Early stopping holds out a validation split to choose how long to train, and
the model it keeps never sees that split. Once the choice is made it is no
longer needed: a new model trained on every training example, along the kept
state's path (its steps at each rate, `RunRecord.best_path`, scaled by the
larger set's size: the same epochs), gains the held-out examples. On a small
set that is a tenth more data (docs/TUNING.md, "Refit on the whole training
file"). The refit model is saved in workdir/refit/ and is what the run tests,
and what evaluate and annotate read (checkpoints.restore_model).
"""
from __future__ import annotations

import logging
import math
import time
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections

from wsabie_jax.training import dispatch, hosts, parallel
from wsabie_jax.training.method import NO_REFIT_WORK, Method, RefitWork
from wsabie_jax.training.recorder import RunRecord, Stop

log = logging.getLogger('wsabie_jax')


def segments(best_path: list, scale: float) -> list[tuple[int, int]]:
  """[(rate drops, steps)] to train: the best state's path with each segment's
  steps times `scale` (rounded; empty segments left out)."""
  scaled = [(int(drops), round(steps * scale)) for drops, steps in best_path]
  return [(drops, steps) for drops, steps in scaled if steps > 0]


def steps_needed(best_path: list, scale: float) -> int:
  """The refit's steps: the best state's path scaled to the whole file."""
  return sum(n for _, n in segments(best_path, scale))


class Reserve:
  """The budget's end kept for the refit (train.refit_reserved): when
  patience runs out, a rate drop is made only where the budget would still
  hold the refit after the drop's own patience, at least `patience`
  validations `every` steps apart at the loop's wall-clock pace so far
  (its validations and checkpoints included); else the run stops there and
  refits. Without it, on Delicious the three drops fill the minute (valid
  MAP 0.3814 → 0.3816) and leave no time for the refit's tenth more data
  (docs/TUNING.md "Refit on the whole training file"). A drop's patience
  starts again at each better validation, so it may outlast that least: after
  a drop, a run also stops to refit where one more interval would leave the
  budget less than the refit (`refit_due`). The refit's work besides its
  steps (Method.refit_work) is held too. One decision, process 0's, so that
  hosts agree."""

  def __init__(self, config: ml_collections.ConfigDict, clock, first_step: int,
               work: RefitWork = NO_REFIT_WORK):
    train, data = config.train, config.data
    self.train, self.clock, self.first_step, self.work = train, clock, first_step, work
    self.scale = (1 / (1 - data.validation_fraction)
                  if (train.refit and train.refit_reserved and train.max_seconds > 0
                      and holds_out(config)) else 0.0)

  def allows_drop(self, step: int, every: int, record: RunRecord,
                  validation_seconds: float = 0.0) -> bool:
    if not self.scale or step <= self.first_step:
      return True
    drop, refit = self._seconds(step, self.train.patience * every, record, validation_seconds)
    fits = bool(parallel.agreed(int(self.clock.seconds + drop + refit <= self.train.max_seconds)))
    if not fits:
      log.info('step %d: a rate drop (at least %.1f s) would leave less than the refit\'s '
               '%.1f s of train.max_seconds: stopping here to refit', step, drop, refit)
    return fits

  def refit_due(self, step: int, every: int, record: RunRecord,
                validation_seconds: float = 0.0) -> bool:
    """After a validation within a drop's patience: whether the budget left
    would no longer hold another `every` steps, the refit and, for the
    stop's own work (its save, the whole file's read), one more interval
    (then the run stops here to refit). A run at its first rate goes on: its
    refit would replay all of its steps, and patience, not the budget,
    chooses how long it trains."""
    if not self.scale or not record.rate_drops or step <= self.first_step:
      return False
    interval, refit = self._seconds(step, every, record, validation_seconds)
    due = bool(parallel.agreed(int(self.clock.seconds + 2 * interval + refit
                                   > self.train.max_seconds)))
    if due:
      log.info('step %d: %d more steps (%.1f s) and a margin as long would leave less than the '
               'refit\'s %.1f s of train.max_seconds: stopping here to refit', step, every,
               interval, refit)
    return due

  def _seconds(self, step: int, steps: int, record: RunRecord,
               validation_seconds: float) -> tuple[float, float]:
    """(`steps` more at the loop's wall-clock pace so far; the refit's steps
    at the steps' own pace, its other work and the evaluations made before
    it at `validation_seconds` each)."""
    wall_a_step = (self.clock.seconds - self.clock.prior) / (step - self.first_step)
    refit = (steps_needed(record.best_path, self.scale) * self.clock.step_seconds / step
             + self.work.seconds() + self.work.evaluations * validation_seconds)
    return steps * wall_a_step, refit


def holds_out(config: ml_collections.ConfigDict) -> bool:
  """Whether the run carves a validation split from its training data, for a
  refit to train on again (streamed shards keep theirs apart)."""
  return config.data.kind != 'shards' and 0 < config.data.validation_fraction < 1


def wanted(config: ml_collections.ConfigDict, record: RunRecord, ckpts) -> bool:
  """A refit is made once, after patience ended the run (a budget or a step
  cap leaves the choice of how long to train unmade), from a validated best.
  Whether refit/ holds one already is process 0's reading for every process
  (a process that read the shared workdir otherwise would train, or skip, the
  refit alone and leave the others waiting on its collectives)."""
  if not (config.train.refit and record.stopped == Stop.EARLY_STOPPING and record.best_path):
    return False
  return not parallel.agreed(int(ckpts.has_refit))


def run(config: ml_collections.ConfigDict, method: Method,
        build: Callable[[ml_collections.ConfigDict, object], Method], record: RunRecord,
        ckpts, steps_trained: int, best: Callable = lambda: None, clock=time.monotonic):
  """Trains the refit model and saves it (refit/); returns it, or None where
  it would not fit in the time budget left (logged). Its steps' time at the
  run's pace and the method's other work (Method.refit_work on the `best()`
  state: its `before` done and spent first) decide, process 0's for every
  process (one refitting alone would wait on the others' collectives)."""
  train = config.train
  if not holds_out(config):
    log.info('train.refit: nothing held out to train on again (no validation split carved '
             'from the training data); the best on validation is the model')
    return None
  start, best_state = clock(), best()  # (reading the whole training file counts too)
  method.refit_work.before(best_state)
  whole = ml_collections.ConfigDict(method.config.to_dict())
  whole.data.validation_fraction = 0.0
  everything = build(whole, method.mesh)
  plan = segments(record.best_path, everything.stream.num_examples / method.stream.num_examples)
  total = sum(n for _, n in plan)
  steps_s = total * (record.step_seconds / max(steps_trained, 1))
  work_s = method.refit_work.seconds()
  spent = record.train_seconds + clock() - start
  left = train.max_seconds - spent if train.max_seconds > 0 else math.inf
  if not parallel.agreed(int(steps_s + work_s <= left)):  # (process 0's clock for all)
    log.info('train.refit: %d steps on the whole training file would take about %.1f s and its '
             'other work %.1f s, more than the %.1f s left of train.max_seconds; the best on '
             'validation is the model', total, steps_s, work_s, max(left, 0.0))
    return None
  log.info('train.refit: %d steps over all %d rows of the training data, along the best '
           'state\'s path (%s)', total, everything.stream.num_examples,
           ', '.join(f'{n} at rate ÷{train.plateau_factor ** d:g}' for d, n in plan))
  state = _along(train, everything, plan)
  jax.block_until_ready(state)
  method.refit_work.run(best_state)
  record.refit_steps = total
  record.train_seconds += clock() - start
  ckpts.save(ckpts.refit(), state, record.to_json())
  hosts.barrier('wsabie_jax: refit saved')
  return state


def _along(train, method: Method, plan: list[tuple[int, int]]):
  """A new state trained on `method`'s data through the plan's segments, each
  at its rate (÷ plateau_factor a drop: the state's rate_scale)."""
  state, step = method.init_state(), 0
  for drops, n in plan:  # (a Dispatcher a segment, its calls cut at its end)
    end = step + n
    steps = dispatch.Dispatcher(train, method, step, end)
    try:
      state = steps.place(state._replace(
          rate_scale=jnp.asarray(train.plateau_factor ** -drops, jnp.float32)))
      while step < end:
        state, _, done = steps(state, step)
        step += done
    finally:
      steps.close()
  return state

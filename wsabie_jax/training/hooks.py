"""What the training loop does between calls of steps, apart from the
algorithm: time accounting, the train log and progress bar, the stop
decision, the validation spacing. Each hook has `after(call)`, run in order
after every call; a hook may set `call.stop` (the loop's `_train` reads it).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import resource
import sys
from typing import Any, Callable

import jax

from wsabie_jax.training import hosts, parallel
from wsabie_jax.training.progress import Progress
from wsabie_jax.training.recorder import Clock, RunRecord, Stop, Summaries, read_stats

log = logging.getLogger('wsabie_jax')


@dataclasses.dataclass
class Call:
  """A call of steps just dispatched: the steps done by its end, its size, the
  state and stats it returns (not yet computed: dispatch is asynchronous)."""
  step: int
  done: int
  state: Any
  stats: dict
  first: bool = False           # the run's first call (its kernels' one-time set-up)
  stop: Stop = Stop.NONE        # set by a hook (or the loop's validation): the run ends


def crossed(step: int, done: int, every: int) -> bool:
  """Whether the last `done` steps, ending at `step`, passed a multiple of `every`."""
  return step // every > (step - done) // every


class StepTime:
  """The steps' own time on `clock`: the compilation a call triggered left out
  (the first call's, a new budget class's), the first call waited on so its
  kernels' set-up is separated. `speed` is (steps, step seconds) finished since
  the first call ended, read one call late: waiting on the device to time a
  call would stall the pipeline on every call."""

  def __init__(self, clock: Clock, compile_seconds: Callable[[], float]):
    self.clock, self._compile_seconds = clock, compile_seconds
    self._compiled = 0.0
    self._since = self.speed = None

  def before(self) -> None:
    self._compiled = self._compile_seconds()

  def after(self, call: Call) -> None:
    self.clock.leave_out(self._compile_seconds() - self._compiled)
    hosts.WHEREABOUTS.step = call.step
    if call.first:
      jax.block_until_ready(call.state)
      self._since = (call.step, self.clock.step_seconds)
    else:  # (after TrainLog's, which waited for the previous call to end)
      self.speed = (call.step - call.done - self._since[0],
                    self.clock.step_seconds - self._since[1])


class TrainLog:
  """The train scalars of a call, read one call late (the device never waits
  on the host): checked finite (`check_finite(stats)`), written to the
  summaries and the progress bar at each log boundary."""

  def __init__(self, train, total_steps: int, pairs_per_row: float, seconds_left: float,
               summaries: Summaries, check_finite: Callable[[dict], None], clock: Clock):
    self.every, self.summaries, self.check_finite = train.log_every_steps, summaries, check_finite
    self.progress = Progress(total_steps, train.batch_size * pairs_per_row,
                             stream=sys.stderr if hosts.is_writer() else None,  # one bar
                             unit='pairs' if pairs_per_row != 1.0 else 'ex',
                             budget_seconds=max(seconds_left, 1e-3) if train.max_seconds else 0.0,
                             may_stop_early=train.patience > 0,
                             work_clock=lambda: clock.step_seconds)  # (the final line's rate)
    self._pending = self._last = None

  def after(self, call: Call) -> None:
    if self._pending is not None:
      self.check_finite(self._pending)
      if crossed(call.step, call.done, self.every):
        scalars = read_stats(self._pending)
        self.summaries.scalars(call.step - call.done, scalars, 'train')
        self.progress.update(call.step, **scalars)
    self._pending, self._last = call.stats, call

  def close(self) -> None:
    """The bar ends on the step the run reached, and why it stopped there."""
    if self._last is not None:
      self.progress.finish(self._last.step, Stop(self._last.stop).value)
    self.progress.close()

  @staticmethod
  def memory(input_held: str) -> None:
    log.info('process %d: input held at most %s; peak memory %s MiB', jax.process_index(),
             input_held, f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f}')


class StopDecision:
  """Stops on the time budget or a signal (Ctrl-C, SIGTERM): one decision a
  call, process 0's, so that hosts stop together or not at all."""

  def __init__(self, max_seconds: float, clock: Clock, requests):
    self.max_seconds, self.clock, self.requests = max_seconds, clock, requests

  def after(self, call: Call) -> None:
    over = bool(self.max_seconds and self.clock.seconds >= self.max_seconds)
    decided = parallel.agreed(int(over) | 2 * int(self.requests.signum is not None))
    call.stop = (Stop.INTERRUPTED if decided & 2 else Stop.MAX_SECONDS if decided & 1
                 else call.stop)


# A budgeted run's validations take at most this share of its time: with many
# labels one costs as much as many steps (standin:many_tags' 815 images ×
# 12,335 labels: 0.34–0.38 s, about 80 steps), and 30 of them in a 10-s
# budget left the steps 2.4 s of it (docs/RESULTS.md).
MAX_VALIDATION_SHARE = 0.25


class ValidationSpacing:
  """The validation interval in steps, `every`: train.eval_every_steps, at most
  max_epochs_between_evals epochs (a fast run on a small set runs many epochs
  a second and can overfit between validations). With max_seconds and
  evals_per_budget set it is refitted once, to spread that many validations
  over what is left of the budget at the speed measured (StepTime.speed),
  and kept in the record so a resumed run validates where the first would
  have; and widened after a validation (`validated`) that took more than
  MAX_VALIDATION_SHARE of an interval's time. The dispatcher cuts its calls
  at `every`, read as it builds each."""

  def __init__(self, train, record: RunRecord, examples: int, step_time: StepTime,
               clock: Clock):
    self.train, self.record, self.step_time, self.clock = train, record, step_time, clock
    epochs = train.max_epochs_between_evals
    self.cap = (max(1, math.ceil(epochs * examples / train.batch_size)) if epochs else math.inf)
    self.every = min(record.eval_every_steps or train.eval_every_steps, self.cap)
    self.validations = 0
    self.seconds = 0.0  # the last validation's (wall-clock)

  def validated(self, seconds: float) -> None:
    """After a validation of `seconds` (wall-clock) in a budgeted run: the
    interval widened to the steps that take (1 − share) / share times as
    long, if it is shorter (within the epochs' cap). The run's first
    validation compiles its program, so its time is not a validation's."""
    self.validations += 1
    self.seconds = seconds
    train = self.train
    if (self.validations < 2 or not (train.max_seconds and train.evals_per_budget)
        or not self.step_time.speed or self.step_time.speed[0] <= 0):
      return
    steps, step_seconds = self.step_time.speed
    share = MAX_VALIDATION_SHARE
    least = parallel.agreed(math.ceil(seconds * (1 - share) / share * steps / max(step_seconds,
                                                                                  1e-9)))
    if min(least, self.cap) > self.every:
      self.record.eval_every_steps = self.every = min(least, self.cap)
      log.info('validating every %d steps: a validation takes %.2f s, at most %.0f%% of the time',
               self.every, seconds, 100 * share)

  def after(self, call: Call) -> None:
    train = self.train
    if (self.record.eval_every_steps is not None
        or not (train.max_seconds and train.evals_per_budget) or self.step_time.speed is None):
      return
    fitted = parallel.agreed(budget_interval(train, *self.step_time.speed, self.clock.seconds))
    if fitted:
      self.record.eval_every_steps = self.every = min(fitted, self.cap)
      log.info('validating every %d steps (about %d times in %.0f s at the speed so far)',
               self.every, train.evals_per_budget, train.max_seconds)


def budget_interval(train, steps: int, step_seconds: float, seconds: float) -> int:
  """The validation interval in steps that spreads evals_per_budget validations
  over what is left of the budget (wall-clock: compilation spent already), at
  the step speed measured once a quarter of an interval's time has run (0
  until then: eval_every_steps holds). Patience counts validations, so it
  scales with the budget too: a 10-second and a 10-minute run both end on
  their best checkpoint (the last state is always validated)."""
  per_eval = max(train.max_seconds - seconds, 0) / train.evals_per_budget
  if steps <= 0 or step_seconds <= 0 or step_seconds < 0.25 * per_eval:
    return 0
  return max(1, round(steps / step_seconds * per_eval))

"""Each of the training loop's hooks (training/hooks.py) on its own, on a fake
clock: the loop itself (training/loop.py _train) is the algorithm only."""
import types

import numpy as np
import pytest

from tests.helpers import FakeClock
from wsabie_jax.training import hooks, recorder, settings
from wsabie_jax.training.recorder import Clock, read_stats


def _call(step, done, stats=None, first=False):
  return hooks.Call(step, done, state=np.zeros(1), stats=stats or {}, first=first)


def test_crossed():
  assert hooks.crossed(16, 16, 10) and hooks.crossed(20, 4, 10) and not hooks.crossed(19, 3, 10)
  assert [s for s in range(1, 40) if hooks.crossed(s, 1, 8)] == [8, 16, 24, 32]


def test_step_time_leaves_out_compilation_and_times_from_the_first_call(monkeypatch):
  fake = FakeClock().install(monkeypatch)
  clock, compiled = Clock(), [0.0]
  timing = hooks.StepTime(clock, lambda: compiled[0])
  timing.before()
  fake.advance(5.0)
  compiled[0] = 4.0  # the first call compiled for 4 of its 5 s
  timing.after(_call(10, 10, first=True))
  assert clock.step_seconds == pytest.approx(1.0) and timing.speed is None
  for step in (20, 30):
    timing.before()
    fake.advance(2.0)
    timing.after(_call(step, 10))
  # Read one call late: at step 30 the steps known finished are 10 … 20 (the
  # previous call), in the 4 s since the first call ended.
  assert timing.speed == (10, pytest.approx(4.0))


def test_train_log_reads_stats_one_call_late_at_log_boundaries():
  seen, written = [], []
  summaries = types.SimpleNamespace(scalars=lambda step, values, prefix: written.append(step))
  train = settings.TrainConfig(log_every_steps=20, batch_size=4)
  log = hooks.TrainLog(train, 100, 1.0, 0.0, summaries, seen.append, Clock())
  stats = lambda i: {'loss': np.float32(i), 'pairs': np.int32(4)}
  for step in range(10, 70, 10):
    log.after(_call(step, 10, stats(step)))
  log.close()
  assert [int(s['loss']) for s in seen] == [10, 20, 30, 40, 50]  # each checked, a call late
  assert written == [10, 30, 50]  # (the call that crossed 20, 40, 60 wrote its predecessor's)
  # The bar counts examples where a row is one pair, pairs where rows hold several.
  assert log.progress.unit == 'ex'
  assert hooks.TrainLog(train, 100, 2.5, 0.0, summaries, seen.append,
                       Clock()).progress.unit == 'pairs'
  # Patience (≥ 1) may end a run before its steps are done: the bar says ≤ its total.
  train = settings.TrainConfig(log_every_steps=20, batch_size=4, patience=1)
  assert hooks.TrainLog(train, 100, 1.0, 0.0, summaries, seen.append, Clock()).progress.bound == '≤'


def test_stop_decision_on_the_budget_or_a_signal(monkeypatch):
  fake = FakeClock().install(monkeypatch)
  clock, requests = Clock(), types.SimpleNamespace(signum=None)
  stop = hooks.StopDecision(10.0, clock, requests)
  call = _call(1, 1)
  stop.after(call)
  assert call.stop == ''
  fake.advance(10.0)
  stop.after(call)
  assert call.stop == 'max_seconds'
  requests.signum = 15
  stop.after(call)
  assert call.stop == 'interrupted'  # a signal outranks the budget
  unlimited = hooks.StopDecision(0.0, clock, types.SimpleNamespace(signum=None))
  call = _call(2, 1)
  unlimited.after(call)
  assert call.stop == ''


def test_validation_spacing_caps_and_fits_to_the_budget(monkeypatch):
  fake = FakeClock().install(monkeypatch)
  clock = Clock()
  train = settings.TrainConfig(batch_size=10, eval_every_steps=1000, max_epochs_between_evals=2.0,
                               max_seconds=100.0, evals_per_budget=10)
  timing = types.SimpleNamespace(speed=None)
  record = recorder.RunRecord(best_metric=0.0)
  spacing = hooks.ValidationSpacing(train, record, 250, timing, clock)
  assert spacing.every == 50  # 2 epochs of 25 steps, under eval_every_steps
  spacing.after(_call(5, 5))
  assert record.eval_every_steps is None  # no speed measured yet
  timing.speed = (100, 5.0)  # 20 steps/s; 10 s an evaluation → 200 steps, capped at 50
  spacing.after(_call(10, 5))
  assert spacing.every == record.eval_every_steps == 50
  loose = settings.TrainConfig(batch_size=10, max_seconds=100.0, evals_per_budget=10)
  record = recorder.RunRecord(best_metric=0.0)
  spacing = hooks.ValidationSpacing(loose, record, 250, timing, clock)
  fake.advance(20.0)  # 80 s left: 8 s an evaluation at 20 steps/s
  spacing.after(_call(10, 5))
  assert spacing.every == record.eval_every_steps == 160
  timing.speed = (1, 100.0)
  spacing.after(_call(20, 5))  # fitted once: kept (a resumed run validates where the first would)
  assert spacing.every == 160
  resumed = hooks.ValidationSpacing(loose, recorder.RunRecord.of(
      {'best_metric': 0.5, 'eval_every_steps': 160}), 250, timing, clock)
  assert resumed.every == 160


def test_budget_interval_waits_for_a_quarter_interval_of_speed():
  train = settings.TrainConfig(max_seconds=100.0, evals_per_budget=10)
  assert hooks.budget_interval(train, 10, 1.0, 0.0) == 0  # 1 s < a quarter of 10 s
  assert hooks.budget_interval(train, 30, 3.0, 0.0) == 100


def test_validation_spacing_keeps_validations_to_a_share_of_the_budget():
  """A validation that costs as much as many steps (many labels) widens the
  interval until the steps take (1 − share) / share times as long: 0.3 s at
  10 ms a step → 90 steps. The first validation (it compiles) does not count,
  nor does a run without a budget; the epochs' cap still holds."""
  clock, timing = Clock(), types.SimpleNamespace(speed=(100, 1.0))
  train = settings.TrainConfig(batch_size=10, eval_every_steps=20, max_seconds=10.0,
                               evals_per_budget=30)
  record = recorder.RunRecord(best_metric=0.0)
  spacing = hooks.ValidationSpacing(train, record, 10_000, timing, clock)
  assert hooks.MAX_VALIDATION_SHARE == 0.25
  spacing.validated(5.0)  # the first: compiling
  assert spacing.every == 20 and record.eval_every_steps is None
  spacing.validated(0.3)
  assert spacing.every == record.eval_every_steps == 90
  spacing.validated(0.1)  # cheap enough at 90 steps: kept
  assert spacing.every == record.eval_every_steps == 90
  capped = hooks.ValidationSpacing(
      settings.TrainConfig(batch_size=10, eval_every_steps=20, max_seconds=10.0,
                           evals_per_budget=30, max_epochs_between_evals=5.0),
      recorder.RunRecord(best_metric=0.0), 100, timing,
      clock)
  capped.validated(5.0)
  capped.validated(0.3)
  assert capped.every == 50  # 5 epochs of 10 steps
  unbudgeted = hooks.ValidationSpacing(settings.TrainConfig(batch_size=10, eval_every_steps=20),
                                       recorder.RunRecord(best_metric=0.0), 10_000, timing, clock)
  unbudgeted.validated(5.0)
  unbudgeted.validated(0.3)
  assert unbudgeted.every == 20


def test_a_steps_stats_read_per_pair():
  """recorder.read_stats: the loss per pair, the share of pairs that found a
  violator, and the draws an update took where the step drew (the exact rank
  draws none, so it has no such figure)."""
  drawn = {'loss': np.float32(6.0), 'pairs': np.int32(4), 'violator_found': np.int32(2),
           'draws_to_violator': np.int32(7)}
  assert read_stats(drawn) == {'loss': 1.5, 'violator_rate': 0.5, 'draws_per_update': 3.5}
  exact = {'loss': np.float32(6.0), 'pairs': np.int32(4), 'violator_found': np.int32(1)}
  assert read_stats(exact) == {'loss': 1.5, 'violator_rate': 0.25}
  assert read_stats({'loss': np.float32(0.0), 'pairs': np.int32(0)}) == {'loss': 0.0}
  assert read_stats({'loss': np.float32(3.0), 'pairs': np.int32(1)}) == {'loss': 3.0}  # one pair

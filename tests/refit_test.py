"""train.refit (training/refit.py): after early stopping, the model trained
again on the whole training file along the best state's path, kept as the
run's model; skipped where the budget left cannot hold it."""
import logging
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from tests import schedule_test
from tests.helpers import FakeClock
from tests.train_test import _tiny_config
from wsabie_jax import methods
from wsabie_jax.api import run
from wsabie_jax.training import checkpoints, parallel, refit
from wsabie_jax.training.method import NO_REFIT_WORK, RefitWork
from wsabie_jax.training.recorder import Clock, RunRecord

TRAIN, VALID = 540, 60  # _tiny_config's 600 training images, 10% carved off for validation


def _refit_state(workdir, config):
  like = methods.get('wsabie').init_state(config, config.data.synthetic.num_features,
                                         config.data.synthetic.num_labels)
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    return ckpts.restore(ckpts.refit(), like)
  finally:
    ckpts.close()


def test_segments_scale_each_rate_and_leave_out_empty_ones():
  assert refit.segments([[0, 8], [1, 0], [2, 8]], 600 / 540) == [(0, 9), (2, 9)]
  assert refit.segments([[0, 100]], 1.0) == [(0, 100)]


def test_the_refit_replays_the_best_states_path(tmp_path, monkeypatch):
  """The scripted schedule (tests/schedule_test.py): best at step 8, a drop at
  16 back to it, the best at 24 (8 steps at rate ÷10), a drop at 32 back to
  that; the path kept is [[0, 8], [1, 8]]. The refit trains 9 + 9 steps
  (× 600/540) on every training image, the second 9 at rate ÷10."""
  real = schedule_test._tiny_config

  def with_refit(**kw):
    return real(**kw, refit=True)
  monkeypatch.setattr(schedule_test, '_tiny_config', with_refit)
  metrics, _, _ = schedule_test._scripted_run(tmp_path)
  assert (metrics['best_step'], metrics['refit_steps']) == (24, 18)
  state, record = _refit_state(tmp_path, with_refit())
  assert record['best_path'] == [[0, 8], [1, 8]] and int(state.step) == 18
  assert float(state.rate_scale) == pytest.approx(0.1)
  assert record['stopped'] == 'early_stopping'


def test_a_one_rate_refit_equals_a_run_on_the_whole_training_file(tmp_path):
  """No drops: the refit is the same model as a run with no validation split
  for refit_steps, bit for bit, and it is what the run tested and what
  evaluate reads."""
  config = _tiny_config(num_epochs=50, eval_every_steps=5, patience=2, refit=True)
  config.optim.kind, config.optim.learning_rate = 'sgd', 30.0  # (wrecked after a few validations)
  got = run.train_and_evaluate(config, tmp_path / 'a')
  assert got['stopped'] == 'early_stopping' and got['refit_steps'] > 0
  assert got['refit_steps'] == round(got['best_step'] * (TRAIN + VALID) / TRAIN)
  whole = _tiny_config(max_steps=got['refit_steps'], eval_every_steps=5)
  whole.optim.kind, whole.optim.learning_rate = 'sgd', 30.0
  whole.data.validation_fraction = 0.0
  plain = run.train_and_evaluate(whole, tmp_path / 'b')
  refit_state, _ = _refit_state(tmp_path / 'a', config)
  restored = run.Restored(str(tmp_path / 'a'))
  for x, y, z in zip(jax.tree.leaves(refit_state.params),
                     jax.tree.leaves(_refit_state_of_plain(tmp_path / 'b', whole)),
                     jax.tree.leaves(restored.state.params)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(x), np.asarray(z))
  assert (got['p@1'], got['map']) == (plain['p@1'], plain['map'])
  assert restored.evaluate()['map'] == pytest.approx(got['map'], abs=1e-6)


def _refit_state_of_plain(workdir, config):
  like = methods.get('wsabie').init_state(config, config.data.synthetic.num_features,
                                         config.data.synthetic.num_labels)
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    return ckpts.restore_model(like)[0].params
  finally:
    ckpts.close()


def test_a_refit_the_budget_left_cannot_hold_is_skipped_with_a_line(tmp_path, caplog):
  """100 steps took 5 s; 111 more would take about 5.6 s, and 1 s is left of
  the 10-s budget: no refit, nothing saved, the log says why."""
  config = methods.check(_tiny_config(max_seconds=10.0, refit=True))
  method = methods.build(config, parallel.make_mesh(1))
  record = RunRecord(best_metric=0.5, best_path=[[0, 100]], step_seconds=5.0,
                     train_seconds=9.0, stopped='early_stopping')
  ckpts = checkpoints.Checkpoints(tmp_path)
  try:
    with caplog.at_level(logging.INFO, 'wsabie_jax'):
      assert refit.wanted(method.config, record, ckpts)
      assert refit.run(method.config, method, methods.build, record, ckpts, 100,
                       clock=lambda: 0.0) is None  # (reading the data takes no time here)
    assert not ckpts.has_refit and record.refit_steps == 0
  finally:
    ckpts.close()
  assert 'would take about 5.6 s and its other work 0.0 s, more than the 1.0 s left' in caplog.text


def _charged_refit(method, folder, now: list, caplog) -> tuple[bool, RunRecord]:
  """refit.run after 100 steps that took 5 s, 2 s charged of a budget, the
  clock reading now[0]: (whether the refit was made and saved, the record)."""
  record = RunRecord(best_metric=0.5, best_path=[[0, 100]], step_seconds=5.0,
                     train_seconds=2.0, stopped='early_stopping')
  ckpts = checkpoints.Checkpoints(folder)
  try:
    with caplog.at_level(logging.INFO, 'wsabie_jax'):
      state = refit.run(method.config, method, methods.build, record, ckpts, 100,
                        best=lambda: 'the best state', clock=lambda: now[0])
    assert (state is not None) == ckpts.has_refit
    return state is not None, record
  finally:
    ckpts.close()


def test_the_refits_other_work_is_held_in_its_budget_and_charged(tmp_path, caplog):
  """Method.refit_work: the 111 steps' 5.6 s and 8 s left of the 10-s budget:
  with work estimated at 3 s it does not fit (the log says why); at 2 s it
  does, the work runs after the steps with the best state, and the 2.5 s it
  takes join the record's train_seconds."""
  config = methods.check(_tiny_config(max_seconds=10.0, refit=True))
  base = methods.build(config, parallel.make_mesh(1))
  now, ran = [0.0], []

  def work_run(best):
    ran.append(best)
    now[0] += 2.5
  for estimate, made in ((3.0, False), (2.0, True)):
    method = base._replace(refit_work=RefitWork(lambda e=estimate: e, work_run))
    got, record = _charged_refit(method, tmp_path / str(made), now, caplog)
    assert got == made
  assert 'about 5.6 s and its other work 3.0 s, more than the 8.0 s left' in caplog.text
  assert ran == ['the best state'] and record.train_seconds == pytest.approx(4.5)


def test_the_work_before_the_refit_is_spent_before_it_is_decided(tmp_path, caplog):
  """RefitWork.before (the member's choice on validation) runs first, on the
  best state, and its seconds count as spent: the 111 steps' 5.6 s and 2 s of
  other work fit the 8 s left of the 10-s budget after a 0.3-s choice and not
  after a 1-s one; either way it ran once, and a made refit's train_seconds
  hold it."""
  config = methods.check(_tiny_config(max_seconds=10.0, refit=True))
  base = methods.build(config, parallel.make_mesh(1))
  now, before = [0.0], []

  def choose(best, takes):
    before.append(best)
    now[0] += takes
  for takes, made in ((1.0, False), (0.3, True)):
    now[0], before[:] = 0.0, []
    method = base._replace(refit_work=RefitWork(lambda: 2.0, lambda best: None,
                                                lambda best, t=takes: choose(best, t)))
    got, record = _charged_refit(method, tmp_path / str(made), now, caplog)
    assert (got, before) == (made, ['the best state'])
  assert 'about 5.6 s and its other work 2.0 s, more than the 7.0 s left' in caplog.text
  assert record.train_seconds == pytest.approx(2.3)


def test_the_reserve_holds_the_refits_other_work_too(monkeypatch):
  """The reserve test's first point (30 s + a drop's 8 s + the refit's 11.1 s
  of 60) with the refit's other work: 1 s fits, 12 s (61.1 s) makes no drop,
  nor 1 s after 11 evaluations of the validation split at 1 s each (61.1 s)."""
  record = RunRecord(best_metric=0.5, best_path=[[0, 100]])
  config = _tiny_config(max_seconds=60.0, refit=True, patience=4)
  for work, allowed in ((NO_REFIT_WORK, True), (RefitWork(lambda: 1.0, None), True),
                        (RefitWork(lambda: 12.0, None), False),
                        (RefitWork(lambda: 1.0, None, evaluations=11), False)):
    fake = FakeClock().install(monkeypatch)
    clock = Clock(prior_seconds=10.0)
    fake.advance(20.0)
    clock.leave_out(10.0)
    assert refit.Reserve(config, clock, 0, work).allows_drop(100, 10, record, 1.0) is allowed


def test_a_refit_is_made_once_and_only_after_early_stopping(tmp_path):
  config = methods.check(_tiny_config(refit=True))
  ckpts = checkpoints.Checkpoints(tmp_path)
  try:
    done = RunRecord(best_metric=0.5, best_path=[[0, 10]], stopped='early_stopping')
    assert refit.wanted(config, done, ckpts)
    for stopped in ('max_seconds', ''):  # a budget or a step cap: how long to train is unchosen
      assert not refit.wanted(config, RunRecord(best_metric=0.5, best_path=[[0, 10]],
                                                stopped=stopped), ckpts)
    (tmp_path / 'refit').mkdir()  # (a refit cut short leaves its folder, no checkpoint)
    assert refit.wanted(config, done, ckpts)
    state = methods.build(config, parallel.make_mesh(1)).init_state()
    ckpts.save(ckpts.refit(), state, done.to_json())
    assert not refit.wanted(config, done, ckpts)
  finally:
    ckpts.close()


def test_a_drop_is_made_only_where_the_budget_still_holds_the_refit_after_it(monkeypatch,
                                                                             caplog):
  """A 60-s run at step 100, 10 s of it spent before the loop (the members),
  20 s in the loop (0.2 s a step of wall-clock), 10 s of them steps (0.1 s a
  step): a drop's patience (4 validations 10 steps apart) takes at least 8 s
  and the refit of the 100-step path (× 600/540: 111 steps) 11.1 s. At 30 s
  that fits (49.1 ≤ 60), the drop is made; at 45 s (0.35 s a step: 14 s) it
  does not, and the log says so. Without train.refit_reserved, the refit or
  a budget, every drop is made."""
  fake = FakeClock().install(monkeypatch)
  clock = Clock(prior_seconds=10.0)
  fake.advance(20.0)
  clock.leave_out(10.0)  # (validations, checkpoints: not the steps' time)
  record = RunRecord(best_metric=0.5, best_path=[[0, 100]])
  config = _tiny_config(max_seconds=60.0, refit=True, patience=4)
  reserve = refit.Reserve(config, clock, first_step=0)
  with caplog.at_level(logging.INFO, 'wsabie_jax'):
    assert reserve.allows_drop(100, 10, record)
    fake.advance(15.0)
    clock.leave_out(15.0)
    assert not reserve.allows_drop(100, 10, record)
  assert ('a rate drop (at least 14.0 s) would leave less than the refit\'s 11.1 s'
          in caplog.text)
  for off in (dict(refit_reserved=False), dict(refit=False), dict(max_seconds=0.0)):
    config = _tiny_config(**{'max_seconds': 60.0, 'refit': True, 'patience': 4, **off})
    assert refit.Reserve(config, clock, first_step=0).allows_drop(100, 10, record), off


def test_after_a_drop_the_run_stops_where_another_interval_would_eat_the_refits_time(
    monkeypatch, caplog):
  """The drop test's 60-s run at step 100 (10 s before the loop, 0.2 s a step
  of wall-clock, the refit 11.1 s), one drop made: at 30 s another 10 steps
  (2 s) and a margin as long leave the refit its time; at 45 s (0.35 s a
  step: 3.5 s, and 45 + 7 + 11.1 > 60) they do not, and the run is due to
  refit; at 40 s (0.3 s a step: 40 + 6 + 11.1 ≤ 60) it is not, unless the
  refit's work first makes evaluations of the validation split (11 of 0.3 s:
  3.3 s more). Before any drop, or without train.refit_reserved, the refit
  or a budget, it never is."""
  fake = FakeClock().install(monkeypatch)
  clock = Clock(prior_seconds=10.0)
  fake.advance(20.0)
  clock.leave_out(10.0)
  dropped = RunRecord(best_metric=0.5, best_path=[[0, 100]], rate_drops=1)
  config = _tiny_config(max_seconds=60.0, refit=True, patience=4)
  reserve = refit.Reserve(config, clock, first_step=0)
  choosing = refit.Reserve(config, clock, 0, RefitWork(lambda: 0.0, None, evaluations=11))
  with caplog.at_level(logging.INFO, 'wsabie_jax'):
    assert not reserve.refit_due(100, 10, dropped)
    fake.advance(10.0)
    clock.leave_out(10.0)
    assert not reserve.refit_due(100, 10, dropped, validation_seconds=0.3)
    assert choosing.refit_due(100, 10, dropped, validation_seconds=0.3)
    fake.advance(5.0)
    clock.leave_out(5.0)
    assert reserve.refit_due(100, 10, dropped)
    assert not reserve.refit_due(100, 10, RunRecord(best_metric=0.5, best_path=[[0, 100]]))
  assert ("step 100: 10 more steps (3.5 s) and a margin as long would leave less than the "
          "refit's 11.1 s" in caplog.text)
  for off in (dict(refit_reserved=False), dict(refit=False), dict(max_seconds=0.0)):
    config = _tiny_config(**{'max_seconds': 60.0, 'refit': True, 'patience': 4, **off})
    assert not refit.Reserve(config, clock, first_step=0).refit_due(100, 10, dropped), off


def test_the_loop_stops_to_refit_when_the_reserve_says_it_is_due(tmp_path, monkeypatch):
  """The scripted schedule (tests/schedule_test.py), its first drop at step
  16: the reserve is asked after each later validation within the budget
  (not before the drop, whose run is at its first rate) and, saying due at
  step 24 (a new best there), stops the run there: no second drop, and the
  refit replays the best's path (8 steps, then 8 at ÷10; × 600/540)."""
  real = schedule_test._tiny_config
  asked = []
  monkeypatch.setattr(schedule_test, '_tiny_config', lambda **kw: real(**kw, refit=True))
  due = refit.Reserve.refit_due
  monkeypatch.setattr(refit.Reserve, 'refit_due',
                      lambda self, step, every, record, seconds: asked.append(
                          (step, record.rate_drops)) is None and bool(record.rate_drops)
                      and step == 24 or due(self, step, every, record, seconds))
  metrics, seen, restored = schedule_test._scripted_run(tmp_path)
  assert [s for s, _, _ in seen] == [4, 8, 12, 16, 20, 24]
  assert [s for s, _, _ in restored] == [16]
  assert asked == [(4, 0), (8, 0), (12, 0), (20, 1), (24, 1)]
  assert (metrics['stopped'], metrics['rate_drops'], metrics['refit_steps']) == (
      'early_stopping', 1, 18)


def test_the_loop_asks_the_reserve_before_each_drop(tmp_path, monkeypatch):
  """The scripted schedule (tests/schedule_test.py), its patience first out
  at step 16: with the reserve saying no there, no drop is made; the run
  stops on patience and refits its best (8 steps × 600/540)."""
  real = schedule_test._tiny_config
  asked = []
  monkeypatch.setattr(schedule_test, '_tiny_config', lambda **kw: real(**kw, refit=True))
  monkeypatch.setattr(refit.Reserve, 'allows_drop',
                      lambda self, step, every, record, seconds: asked.append(step) and False)
  metrics, seen, restored = schedule_test._scripted_run(tmp_path)
  assert asked == [16] and restored == [] and [s for s, _, _ in seen] == [4, 8, 12, 16]
  assert (metrics['stopped'], metrics['rate_drops'], metrics['refit_steps']) == (
      'early_stopping', 0, 9)


def test_process_0_decides_whether_the_refit_fits(tmp_path, monkeypatch):
  """The budget test's numbers (5.6 s needed, 1 s left here), but process 0's
  clock says it fits: this process refits too, as every process must (one
  that refit alone would wait on the others' collectives). And the reverse."""
  config = methods.check(_tiny_config(max_seconds=10.0, refit=True))
  method = methods.build(config, parallel.make_mesh(1))
  for process_0_says, made in ((1, True), (0, False)):
    monkeypatch.setattr(parallel, 'agreed', lambda value, said=process_0_says: said)
    record = RunRecord(best_metric=0.5, best_path=[[0, 100]], step_seconds=5.0,
                       train_seconds=9.0 if made else 0.0, stopped='early_stopping')
    ckpts = checkpoints.Checkpoints(tmp_path / str(made))
    try:
      state = refit.run(method.config, method, methods.build, record, ckpts, 100,
                        clock=lambda: 0.0)
      assert (state is not None, ckpts.has_refit, record.refit_steps) == (made, made,
                                                                           111 * made)
    finally:
      ckpts.close()


def test_process_0_decides_whether_a_refit_is_already_made(monkeypatch):
  """refit/ read by process 0 for every process: where it saw a refit this
  process makes none though its own read found none, and the reverse."""
  config = _tiny_config(refit=True)
  record = RunRecord(best_metric=0.5, best_path=[[0, 100]], stopped='early_stopping')
  for process_0_read, this_read, wanted in ((1, False, False), (0, True, True)):
    monkeypatch.setattr(parallel, 'agreed', lambda value, said=process_0_read: said)
    assert refit.wanted(config, record, SimpleNamespace(has_refit=this_read)) is wanted
  monkeypatch.setattr(parallel, 'agreed', lambda value: pytest.fail('asked without a choice'))
  record.stopped = 'max_seconds'  # (nothing to agree on: no refit after a budget's stop)
  assert not refit.wanted(config, record, SimpleNamespace(has_refit=False))

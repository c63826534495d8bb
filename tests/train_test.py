"""The training loop: resume is exact, early stopping and the time budget stop it."""
import functools
import json
import pathlib

import jax
import numpy as np
import pytest

from wsabie_jax.training import checkpoints as checkpointing
from wsabie_jax import methods
from wsabie_jax.api import configs, run
from wsabie_jax.training import loop, parallel, settings, workdir as workdir_lib
from tests import helpers

pytestmark = pytest.mark.slow  # whole trainings through the loop


def _tiny_config(**train_overrides):
  c = configs.load('wsabie_synthetic:small')
  c.data.num_train, c.data.num_test = 600, 100
  c.data.synthetic.num_labels, c.data.synthetic.num_features = 40, 200
  c.model.dim = 8
  c.train.batch_size = 16
  c.train.eval_subset = 50
  c.train.log_every_steps = 5
  with c.train.ignore_type():  # (num_epochs='auto')
    c.train.update(train_overrides)
  return c


def _latest_state(workdir, config):
  like = methods.get('wsabie').init_state(config, config.data.synthetic.num_features,
                                         config.data.synthetic.num_labels)
  ckpts = checkpointing.Checkpoints(workdir)
  state, record = ckpts.restore(ckpts.latest, like)
  ckpts.close()
  return state, record


def _adaptive(c):
  c.loss.update(sampler='adaptive', violators='all', rank_estimate='violator_count',
                rank_scale=0.05, refresh_every_pairs=5 * 16)  # every 5 steps
  return c


@pytest.mark.parametrize('sampler', ['uniform', 'adaptive'])
def test_resume_gives_identical_parameters(tmp_path, sampler):
  """N steps in one go == N/2 steps, stop, resume, N/2 more (same data, same RNG);
  with the adaptive sampler its lists (refreshed at step 10, used until 15) too."""
  overrides = dict(eval_every_steps=7, checkpoint_every_steps=1000, patience=100,
                   deterministic=True)  # exact on a GPU too (training/dispatch.py)
  prepare = _adaptive if sampler == 'adaptive' else (lambda c: c)
  one_go = prepare(_tiny_config(max_steps=24, **overrides))
  run.train_and_evaluate(one_go, tmp_path / 'a')
  half = prepare(_tiny_config(max_steps=12, **overrides))
  run.train_and_evaluate(half, tmp_path / 'b')
  _, record = _latest_state(tmp_path / 'b', half)
  assert record['data_position']['pairs_consumed'] == 12 * 16
  metrics = run.train_and_evaluate(one_go, tmp_path / 'b')
  assert metrics['steps'] == 24
  a, _ = _latest_state(tmp_path / 'a', one_go)
  b, record = _latest_state(tmp_path / 'b', one_go)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  assert record['data_position']['pairs_consumed'] == 24 * 16
  if sampler == 'adaptive':
    assert int(b.sampler.refreshed_at) == 20


def _final_state(method: str, config, workdir):
  vocab = workdir_lib.load_vocabulary(workdir)
  ckpts = checkpointing.Checkpoints(workdir)
  state, _ = ckpts.restore(ckpts.latest, methods.get(method).like_state(config, vocab))
  ckpts.close()
  return state


@pytest.mark.parametrize('method,spec', [
    ('wsabie', 'wsabie_synthetic:small'), ('wsabie', 'adaptive'), ('wsabie', 'rows_of_3'),
    ('wsabie', 'packs_on_device'), ('wsabie', 'gathered_ahead'), ('wsabie', 'static_length'),
    ('skipgram', 'skipgram_synthetic:proposed,small'), ('parts', 'parts_synthetic:shared,iw,small')])
@pytest.mark.usefixtures('users_codegen')
def test_many_steps_per_call_equal_one_step_per_call(tmp_path, method, spec):
  """steps_per_call = 5 (a device-resident stream, lax.fori_loop, calls cut at the
  validations every 7 steps) gives bit-identical parameters, optimiser state
  and sampler lists to one dispatch a step; and a run stopped mid-call (step 9)
  and resumed equals both. Packs are planned on the host (CPU's 'auto') or,
  'packs_on_device', built by the step from the ids (an accelerator's), or
  'gathered_ahead', built for the whole call before its steps (train.gather_ahead);
  'static_length': each call run by programs of known lengths (train.call_length)."""
  if method == 'parts':
    helpers.skip_without_wordnet()

  def config(steps, per_call):
    if spec == 'rows_of_3':  # rows of an image and 3 of its pairs, labels read whole
      c = _tiny_config(positives_per_row=3)
      c.model.tables = 'whole'
    elif spec == 'packs_on_device':
      c = _tiny_config()
      c.train.plan_packs = 'device'
    elif spec == 'gathered_ahead':  # a call's packs built on the device, all before its steps
      c = _tiny_config()
      c.train.update(plan_packs='device', gather_ahead=True)
    elif spec == 'static_length':  # an accelerator's: full calls of 5 steps a program of 5
      c = _tiny_config()
      c.train.update(plan_packs='device', call_length='static')
    else:
      c = _adaptive(_tiny_config()) if spec == 'adaptive' else configs.load(spec)
    c.train.update(max_steps=steps, eval_every_steps=7, checkpoint_every_steps=1000,
                   patience=100, steps_per_call=per_call, eval_subset=50, deterministic=True)
    if method == 'skipgram':
      c.oov.steps = 0
    if method == 'parts':
      c.proxy.update(num_valid=50, num_test=50)
    return c

  run.train_and_evaluate(config(16, 1), tmp_path / 'one')
  run.train_and_evaluate(config(16, 5), tmp_path / 'many')
  run.train_and_evaluate(config(9, 5), tmp_path / 'resumed')
  run.train_and_evaluate(config(16, 5), tmp_path / 'resumed')
  states = [_final_state(method, config(16, 1), tmp_path / d) for d in ('one', 'many', 'resumed')]
  assert int(states[0].step) == 16
  assert_same_states(states[0], states[1], states[2])


def test_static_call_lengths_compile_two_programs(monkeypatch):
  """train.call_length 'static': the full calls (5 steps) run a program whose
  loop has the length 5 built in, the short calls before each validation (2
  steps) the traced one: two programs, however many calls."""
  from wsabie_jax.training import dispatch
  lengths = []
  compile_many = dispatch.Dispatcher._compile_many

  def recorded(self, *args, **kwargs):
    lengths.append(args[4] if len(args) > 4 else kwargs.get('length'))
    return compile_many(self, *args, **kwargs)
  monkeypatch.setattr(dispatch.Dispatcher, '_compile_many', recorded)
  c = _tiny_config(max_steps=28, eval_every_steps=7, steps_per_call=5, call_length='static',
                   plan_packs='device', checkpoint_every_steps=1000)
  method = methods.of(c).build(methods.of(c).fit(c)[0], parallel.make_mesh(1))
  calls = dispatch.Dispatcher(settings.TrainConfig(**c.train.to_dict()), method, 0, 28)
  state, step, sizes = calls.place(method.init_state()), 0, []
  while step < 28:
    state, _, done = calls(state, step)
    step += done
    sizes.append(done)
  calls.close()
  assert sizes == [5, 2] * 4 and sorted(lengths, key=str) == [5, None]
  assert len(calls._executables) == 2


def assert_same_states(one, many, resumed):
  """`many` steps a call equals one a call: bit for bit on CPU; on a GPU the
  scan body and the lone step are fused differently by XLA, so float sums may
  round differently (within 1e-5). A resumed run is always bit-identical to
  the uninterrupted one of its own mode."""
  exact = jax.default_backend() == 'cpu'
  for x, y, z in zip(jax.tree.leaves(one), jax.tree.leaves(many), jax.tree.leaves(resumed)):
    np.testing.assert_array_equal(np.asarray(y), np.asarray(z))
    if exact or not np.issubdtype(np.asarray(x).dtype, np.floating):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    else:
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)


def test_device_stream_gathers_the_host_batches():
  """The device-resident gather of a step's ids, and of the host's plan of its
  packs, is the host stream's batch."""
  from wsabie_jax.data import batching, synthetic
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=30, num_features=100), 300)
  for stream in (batching.PairStream(ds, 32, 0), batching.PairStream(ds, 32, 0, positives_per_row=3),
                 batching.ImageStream(ds, batching.pad_images(ds), 32, 0)):
    table = jax.device_put(stream.table())
    for step in (0, 7, 40):  # several epochs
      want = stream.batch(step)
      budget = stream.budget(stream.ids(step)[None])  # (None: rows padded, not packed)
      packed = {'budget': budget} if budget is not None else {}
      got = [jax.jit(functools.partial(stream.gather, **packed))(table, stream.ids(step))]
      if stream.plans:  # the host's plan of the packs, read on the device
        planned = stream.plan(stream.ids(step)[None], packed['budget'])
        got.append(jax.jit(stream.gather_planned)(table, jax.tree.map(lambda a: a[0], planned)))
      for g in got:
        assert jax.tree.structure(g) == jax.tree.structure(want)
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(want)):
          np.testing.assert_array_equal(np.asarray(a), b)


def test_early_stopping_keeps_best_checkpoint(tmp_path):
  c = _wrecking_config(num_epochs=50)
  metrics = run.train_and_evaluate(c, tmp_path)
  assert metrics['stopped'] == 'early_stopping'
  assert metrics['steps'] < 50 * 600 // 16
  saved = json.loads((tmp_path / 'metrics.json').read_text())
  assert saved['best_step'] <= saved['steps'] - 2 * 5


def _wrecking_config(**train_overrides):
  """A learning rate this large wrecks the model after the first evaluations."""
  c = _tiny_config(eval_every_steps=5, patience=2, **train_overrides)
  c.optim.kind, c.optim.learning_rate = 'sgd', 30.0
  return c


def test_a_plateau_goes_back_to_the_best_at_a_lower_rate(tmp_path, monkeypatch):
  """train.plateau_drops: when patience runs out the run restarts from its best
  state with the rate ÷ plateau_factor, its step count going on, and stops the
  time after the last drop. A factor of 10⁶ all but freezes the rows, so the
  first validation after a drop reads the best state again, not the one it left.
  The rate is a value of the state: no drop compiles anything (every XLA
  compilation counted from the first drop to the end of training)."""
  scales, drops, compiles = [], [], []
  back_to_best, train = loop._back_to_best, loop._train

  def dropped(call, *a):
    drops.append((call.step, len(compiles)))
    state = back_to_best(call, *a)
    scales.append(float(state.rate_scale))
    return state

  def trained(*a):
    state = train(*a)
    drops.append(('end', len(compiles)))
    return state
  monkeypatch.setattr(loop, '_back_to_best', dropped)
  monkeypatch.setattr(loop, '_train', trained)
  c = _wrecking_config(num_epochs=50, plateau_drops=2, plateau_factor=1e6)
  with helpers.compilations_counted(compiles):
    metrics = run.train_and_evaluate(c, tmp_path)
  assert metrics['stopped'] == 'early_stopping' and metrics['rate_drops'] == 2
  assert scales == [pytest.approx(1e-6), pytest.approx(1e-12)] and len(drops) == 3
  assert drops[0][1] > 0 and drops[-1][1] == drops[0][1], (drops, compiles)
  history = [json.loads(line) for line in (tmp_path / 'history.jsonl').read_text().splitlines()]
  steps = [h['step'] for h in history]
  assert steps == sorted(set(steps))  # no step validated twice: none replayed
  before = [h for h in history if h['step'] <= drops[0][0]]
  best = max(before, key=lambda h: h['p@1'])  # (the first of equals, as the recorder keeps)
  after = next(h for h in history if h['step'] > drops[0][0])
  assert abs(before[-1]['map'] - best['map']) > 2e-3  # the state it left is another
  assert after['map'] == pytest.approx(best['map'], abs=2e-4)
  assert after['p@1'] == best['p@1']


def test_a_run_resumed_after_a_drop_goes_on_at_the_lowered_rate(tmp_path):
  """A run stopped after a drop and resumed equals one that never stopped."""
  def config(max_steps):
    return _wrecking_config(max_steps=max_steps, plateau_drops=3, checkpoint_every_steps=1000)
  run.train_and_evaluate(config(60), tmp_path / 'a')
  run.train_and_evaluate(config(30), tmp_path / 'b')
  _, half = _latest_state(tmp_path / 'b', config(30))
  assert half['rate_drops'] >= 1
  run.train_and_evaluate(config(60), tmp_path / 'b')
  (a, record), (b, _) = (_latest_state(tmp_path / d, config(60)) for d in ('a', 'b'))
  assert record['rate_drops'] > half['rate_drops']
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize('spec', ['skipgram_synthetic:proposed,small',
                                  'parts_synthetic:shared,iw,small'])
def test_every_method_drops_its_rate_on_a_plateau(tmp_path, spec):
  """The loop's drops work on every method's state (patience 1: the first
  validation that is not a new best drops the rate)."""
  if spec.startswith('parts'):
    helpers.skip_without_wordnet()
  c = configs.load(spec)
  c.train.update(max_steps=40, eval_every_steps=2, patience=1, plateau_drops=2,
                 checkpoint_every_steps=1000)
  if 'oov' in c:
    c.oov.steps = 0
  metrics = run.train_and_evaluate(c, tmp_path)
  assert metrics['rate_drops'] >= 1
  assert metrics['steps'] == 40 or (metrics['rate_drops'] == 2
                                    and metrics['stopped'] == 'early_stopping')


def test_time_budget_stops_training(tmp_path):
  for per_call in (1, 16):  # the budget is checked after each dispatch
    c = _tiny_config(max_seconds=1e-3, num_epochs=1000, eval_every_steps=10**6,
                     steps_per_call=per_call)
    metrics = run.train_and_evaluate(c, tmp_path / str(per_call))
    assert metrics['stopped'] == 'max_seconds' and metrics['steps'] == per_call


def test_a_raised_budget_goes_on_and_a_spent_one_says_so(tmp_path, monkeypatch, caplog):
  """A run stopped by its time budget and resumed with a larger one trains on;
  resumed with the same budget, or past its epochs, it says why it trains
  nothing (it once trained 0 steps without a word). A fake clock: 10 ms a read."""
  helpers.FakeClock(per_read=0.01).install(monkeypatch)
  c = _tiny_config(max_seconds=0.5, num_epochs=10**4, eval_every_steps=10**6, steps_per_call=4,
                   checkpoint_every_steps=10**6)
  first = run.train_and_evaluate(c, tmp_path)
  assert first['stopped'] == 'max_seconds'
  with caplog.at_level('WARNING', logger='wsabie_jax'):
    again = run.train_and_evaluate(c, tmp_path)
  assert again['steps'] == first['steps'] and 'spent its budget' in caplog.text
  c.train.max_seconds = 1.5
  raised = run.train_and_evaluate(c, tmp_path)
  assert raised['steps'] > first['steps'] and raised['stopped'] == 'max_seconds'
  caplog.clear()
  c.train.update(max_seconds=0.0, num_epochs=1)  # (past one epoch already)
  with caplog.at_level('WARNING', logger='wsabie_jax'):
    ended = run.train_and_evaluate(c, tmp_path)
  assert ended['steps'] == raised['steps'] and 'the end train.num_epochs=1 sets' in caplog.text


def test_step_time_leaves_out_what_reads_the_state(tmp_path, monkeypatch):
  """Pairs/s divide by the steps' time: validations and the finiteness check
  before them (whose first call compiles) are left out of it, though the
  wall-clock budget counts them. (A fake clock: only what the test slows takes time.)"""
  from wsabie_jax.training import loop
  slow, clock = 0.3, helpers.FakeClock().install(monkeypatch)
  all_finite, validate = loop._all_finite, loop._validate
  monkeypatch.setattr(loop, '_all_finite', lambda state: (clock.advance(slow), all_finite(state))[1])
  monkeypatch.setattr(loop, '_validate', lambda *a: (clock.advance(slow), validate(*a))[1])
  c = _tiny_config(max_steps=40, eval_every_steps=10, patience=100, steps_per_call=5)
  metrics = run.train_and_evaluate(c, tmp_path)
  _, record = _latest_state(tmp_path, c)
  assert metrics['train_seconds'] == pytest.approx(8 * slow)  # 4 validations, each slowed twice
  assert record['step_seconds'] == 0.0, record


def test_step_time_leaves_out_compilation_and_times_the_first_call(tmp_path, monkeypatch):
  """Compiling a call is left out of the steps' time (compiled ahead of the
  call: dispatch.Dispatcher.compile_seconds), while the first call's steps
  count as any other's (their pairs are counted). (A fake clock: only what
  the test slows takes time.)"""
  import types
  from wsabie_jax.training import dispatch
  slow, clock = 0.3, helpers.FakeClock().install(monkeypatch)
  compiled, call = dispatch.Dispatcher._compiled, dispatch.Dispatcher.__call__

  def slow_to_compile(self, *budget_and_length):
    jitted = compiled(self, *budget_and_length)
    return types.SimpleNamespace(lower=lambda *a: (clock.advance(slow), jitted.lower(*a))[1])

  calls = []

  def first_call_slow(self, state, step):
    out = call(self, state, step)
    if not calls:
      clock.advance(slow)  # as a slow first run of the compiled steps would be
    calls.append(step)
    return out

  monkeypatch.setattr(dispatch.Dispatcher, '_compiled', slow_to_compile)
  monkeypatch.setattr(dispatch.Dispatcher, '__call__', first_call_slow)
  c = _tiny_config(max_steps=40, eval_every_steps=10, patience=100, steps_per_call=5)
  metrics = run.train_and_evaluate(c, tmp_path)
  _, record = _latest_state(tmp_path, c)
  assert len(calls) == 8 and metrics['train_seconds'] == pytest.approx(2 * slow)
  assert record['step_seconds'] == pytest.approx(slow), record


@pytest.mark.parametrize('caller_froze', [False, True])
def test_objects_alive_at_the_start_are_kept_out_of_collections(tmp_path, monkeypatch,
                                                                caller_froze):
  """The loop freezes the objects alive when it starts (a full collection of
  them landed in short runs' steps) and hands them back after; objects a
  caller froze stay frozen, as the caller left them."""
  import gc
  from wsabie_jax.training import loop
  seen, validate = [], loop._validate
  monkeypatch.setattr(loop, '_validate',
                      lambda *a: (seen.append(gc.get_freeze_count()), validate(*a))[1])
  gc.unfreeze()  # from nothing frozen, whatever ran before in this process
  if caller_froze:
    gc.freeze()
  try:
    before = gc.get_freeze_count()
    run.train_and_evaluate(_tiny_config(max_steps=20, eval_every_steps=10), tmp_path)
    after = gc.get_freeze_count()
  finally:
    gc.unfreeze()
  assert len(seen) == 2 and min(seen) > 0, seen
  # (frozen objects freed by their counts leave it: the count may only fall)
  assert (after > 0) == caller_froze and after <= before, (before, after)


def test_validations_spread_over_the_time_budget(tmp_path, monkeypatch):
  """evals_per_budget: the interval follows the measured speed, so about that
  many validations fall in the budget, whatever eval_every_steps says; the
  interval is kept for a resumed run. The clock is a fake that advances
  10 ms a read: the same steps and validations on any machine, loaded or not."""
  helpers.FakeClock(per_read=0.01).install(monkeypatch)
  c = _tiny_config(max_seconds=6.0, num_epochs=10**5, evals_per_budget=6, eval_every_steps=10**6,
                   patience=100, steps_per_call=4)
  metrics = run.train_and_evaluate(c, tmp_path)
  steps = [json.loads(line)['step'] for line in (tmp_path / 'history.jsonl').read_text().splitlines()]
  assert metrics['stopped'] == 'max_seconds'
  # 6 asked (9 given: the fake clock's validations take no time, so the
  # steps after the fit run faster than measured); eval_every_steps would give 1.
  assert 4 <= len(steps) <= 12 and metrics['eval_every_steps'] < metrics['steps'], steps
  c.train.max_seconds = 12.0  # resumed: the same interval
  assert run.train_and_evaluate(c, tmp_path)['eval_every_steps'] == metrics['eval_every_steps']


def test_a_time_budget_lifts_the_auto_epoch_cap(tmp_path, monkeypatch):
  """num_epochs='auto' caps a run at AUTO_EPOCHS (here 1) without a budget;
  with max_seconds the run goes on past it until the budget (or patience)
  ends it; a number the config gives stays a cap with a budget too. A fake
  clock (10 ms a read): the same steps on any machine."""
  from wsabie_jax.training import settings
  monkeypatch.setattr(settings, 'AUTO_EPOCHS', 1)
  helpers.FakeClock(per_read=0.01).install(monkeypatch)
  common = dict(eval_every_steps=10, patience=100, steps_per_call=4)
  runs = {'auto': _tiny_config(num_epochs='auto', **common),
          'auto, budget': _tiny_config(num_epochs='auto', max_seconds=6.0, **common),
          '1, budget': _tiny_config(num_epochs=1, max_seconds=6.0, **common)}
  got = {name: run.train_and_evaluate(c, tmp_path / name.replace(', ', '_'))
         for name, c in runs.items()}
  assert got['auto']['stopped'] == 'completed' and abs(got['auto']['epochs'] - 1) < 0.05
  assert got['1, budget']['stopped'] == 'completed' and abs(got['1, budget']['epochs'] - 1) < 0.05
  assert got['auto, budget']['stopped'] == 'max_seconds' and got['auto, budget']['epochs'] > 2, got


def test_total_steps_of_each_schedule():
  from wsabie_jax.training import settings
  T = settings.TrainConfig
  assert settings.total_steps(T(num_epochs=3), 10) == 30
  assert settings.total_steps(T(num_epochs=3, max_seconds=5.0), 10) == 30  # a cap with a budget
  assert settings.total_steps(T(num_epochs='auto'), 10) == settings.AUTO_EPOCHS * 10
  assert settings.total_steps(T(num_epochs='auto', max_seconds=5.0), 10) == settings.UNCAPPED
  assert settings.total_steps(T(num_epochs='auto', max_steps=7, max_seconds=5.0), 10) == 7
  assert settings.total_steps(T(num_epochs=0, max_seconds=5.0), 10) == settings.UNCAPPED
  with pytest.raises(ValueError, match='nothing would end the run'):
    T(num_epochs=0)
  # 'auto' is resolved when the run starts, and recorded (config.json holds no 'auto').
  assert settings.resolved(T(num_epochs='auto', max_seconds=5.0), 'cpu') == {
      'num_epochs': 0, 'plan_packs': 'host', 'call_length': 'traced'}
  assert settings.resolved(T(num_epochs=3, plan_packs='device', call_length='traced'),
                           'cpu') == {}
  assert settings.resolved(T(), 'gpu') == {'plan_packs': 'device', 'call_length': 'static'}


@pytest.mark.parametrize('process_zero', [0, 1])
def test_clock_decisions_are_process_zeros(tmp_path, monkeypatch, process_zero):
  """Multi-host: the time budget's stop and the fitted validation interval are
  process 0's (parallel.agreed), not this host's clock's. A stand-in for
  process 0 that answers 0 (not over time, nothing fitted) keeps a run with a
  spent budget going to its last step; one that answers 1 stops a run with
  an unspent budget after its first call."""
  from wsabie_jax.training import parallel
  monkeypatch.setattr(parallel, 'agreed', lambda value: process_zero)
  c = _tiny_config(max_steps=40, max_seconds=1e-3 if process_zero == 0 else 1e3,
                   eval_every_steps=10, evals_per_budget=4, patience=100, steps_per_call=4)
  metrics = run.train_and_evaluate(c, tmp_path)
  if process_zero == 0:
    assert (metrics['stopped'], metrics['steps'], metrics['eval_every_steps']) == ('completed', 40, 10)
  else:
    assert (metrics['stopped'], metrics['steps']) == ('max_seconds', 4), metrics


def test_validations_at_least_every_few_epochs(tmp_path):
  """max_epochs_between_evals caps the validation interval (eval_every_steps
  asks for none in 100 steps; one every half epoch is given), and calls of
  many steps end there: no validation comes late."""
  c = _tiny_config(max_steps=100, eval_every_steps=10**6, patience=100, steps_per_call=64,
                   max_epochs_between_evals=0.5)
  run.train_and_evaluate(c, tmp_path)
  from wsabie_jax.methods import common
  cap = -(-common.load_splits(c)[0].label_idx.size // (2 * 16))  # ⌈half an epoch / 16⌉
  steps = [json.loads(line)['step'] for line in (tmp_path / 'history.jsonl').read_text().splitlines()]
  assert 20 < cap < 50 and steps == [cap, 2 * cap, 3 * cap, 100][:len(steps)], (cap, steps)
  assert len(steps) == 100 // cap + 1


def test_skipgram_resume_gives_identical_state(tmp_path):
  """The tower, its Adam state, the word rows and their accumulators resume exactly."""
  from wsabie_jax.api import configs

  def config(steps):
    c = configs.load('skipgram_synthetic:proposed,small')
    c.train.update(max_steps=steps, eval_every_steps=5, checkpoint_every_steps=1000, patience=100,
                   deterministic=True)
    c.oov.steps = 0
    return c

  run.train_and_evaluate(config(12), tmp_path / 'a')
  run.train_and_evaluate(config(6), tmp_path / 'b')
  run.train_and_evaluate(config(12), tmp_path / 'b')
  vocab = workdir_lib.load_vocabulary(tmp_path / 'a')
  states = []
  for name in ('a', 'b'):
    ckpts = checkpointing.Checkpoints(tmp_path / name)
    states.append(ckpts.restore(ckpts.latest, methods.get('skipgram').like_state(config(12), vocab))[0])
    ckpts.close()
  assert int(states[1].step) == 12
  for x, y in zip(jax.tree.leaves(states[0]), jax.tree.leaves(states[1])):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_mean_rank_selection_keeps_the_lowest(tmp_path):
  """Paper 002 selects on validation mean rank: lower is better there, higher
  for every other metric."""
  from wsabie_jax.training import recorder
  summaries = recorder.Summaries(tmp_path)
  by_rank = recorder.Recorder(tmp_path, 'iw_pair_mean_rank', 2, summaries)
  by_map = recorder.Recorder(tmp_path, 'iw_pair_map', 2, summaries)
  got = [(by_rank.validation(s, v, 0.0), by_map.validation(s, v, 0.0)) for s, v in enumerate(
      [{'iw_pair_mean_rank': 30.0, 'iw_pair_map': 0.2}, {'iw_pair_mean_rank': 12.0, 'iw_pair_map': 0.1},
       {'iw_pair_mean_rank': 20.0, 'iw_pair_map': 0.3}])]
  summaries.close()
  assert got == [(True, True), (True, False), (False, True)]
  assert by_rank.record.best_step == 1 and by_map.record.best_step == 2


@pytest.mark.parametrize('held', [True, False])
def test_best_is_written_before_the_latest_names_it(tmp_path, monkeypatch, held):
  """A small state's best is held in memory and written just before each
  latest checkpoint (and at the end), so no write lands between steps; a
  large one's is written at its validation. Either way best/ ends with the
  record's best step, and every latest record names a best already on disk."""
  if not held:
    monkeypatch.setattr(checkpointing, 'WAIT_BELOW_BYTES', 0)
  writes = []
  save = checkpointing.Checkpoints.save

  def spy(manager, state, record):
    kind = pathlib.Path(manager.directory).name
    writes.append((kind, int(jax.device_get(state.step)), record['best_step']))
    return save(manager, state, record)

  monkeypatch.setattr(checkpointing.Checkpoints, 'save', staticmethod(spy))
  c = _tiny_config(max_steps=40, eval_every_steps=5, checkpoint_every_steps=20, patience=100)
  metrics = run.train_and_evaluate(c, tmp_path)
  bests = [step for kind, step, _ in writes if kind == 'best']
  assert bests and bests[-1] == metrics['best_step'], (writes, metrics['best_step'])
  written = set()
  for kind, step, best_step in writes:
    if kind == 'best':
      written.add(step)
    else:
      assert best_step in written, writes  # the latest's record names a best on disk
  if held:  # written only just before a latest checkpoint
    assert all(writes[i + 1][0] == 'checkpoints' for i, w in enumerate(writes) if w[0] == 'best')
  else:  # at each validation that improved
    assert all(step % 5 == 0 for step in bests) and len(bests) > 2, writes


def test_summaries_are_readable_events(tmp_path):
  """A call's scalars, written as one event, read back with their tags and values."""
  import struct
  from tensorboardX.proto import event_pb2
  from wsabie_jax.training import recorder
  summaries = recorder.Summaries(tmp_path)
  summaries.scalars(7, {'p@1': 0.25, 'map': 0.5, 'stopped': 'x'}, 'valid')
  summaries.close()
  (path,) = (tmp_path / 'tensorboard').iterdir()
  data, events = path.read_bytes(), []
  while data:  # TFRecord: length, its crc, the event, its crc
    n = struct.unpack('<Q', data[:8])[0]
    events.append(event_pb2.Event.FromString(data[12:12 + n]))
    data = data[12 + n + 4:]
  got = {(e.step, v.tag): v.simple_value for e in events for v in e.summary.value}
  assert got == {(7, 'valid/p@1'): 0.25, (7, 'valid/map'): 0.5}


def test_the_calls_fitted_to_the_platform_and_their_input_wait_are_recorded(tmp_path,
                                                                            monkeypatch):
  """train.steps_per_call and train.input_threads left 0 are the CPU's values
  in config.json (settings.ON_CPU), never 0, and num_epochs and plan_packs
  'auto' their resolved values; the loop's wait for each call's
  input is timed (a fake timer: each call waits 0.125 s) into the call's stats,
  the train log's input_wait_ms and metrics.json's input_wait_seconds."""
  from wsabie_jax.training import dispatch, recorder as recorder_lib
  reads = iter(range(10**6))
  monkeypatch.setattr(dispatch, 'time', type('FakeTime', (), {
      'perf_counter': staticmethod(lambda: 0.125 * next(reads))}))
  calls, call = [], dispatch.Dispatcher.__call__
  monkeypatch.setattr(dispatch.Dispatcher, '__call__',
                      lambda self, *a: calls.append(call(self, *a)) or calls[-1])
  metrics = run.train_and_evaluate(_tiny_config(max_steps=40, eval_every_steps=10,
                                                num_epochs='auto'), tmp_path)
  stored = json.loads((tmp_path / 'config.json').read_text())
  recorded = stored['train']
  assert (recorded['steps_per_call'], recorded['input_threads']) == (16, 1)
  # 'auto' means fitted and recorded: config.json holds the values the run took.
  from wsabie_jax.training import identity, settings
  assert (recorded['num_epochs'], recorded['plan_packs']) == (settings.AUTO_EPOCHS, 'host')
  assert 'auto' not in identity.flatten(stored).values()
  assert len(calls) == 4 and all(stats['input_wait_seconds'] == 0.125 for _, stats, _ in calls)
  assert metrics['input_wait_seconds'] == 0.5
  assert recorder_lib.read_stats(calls[0][1])['input_wait_ms'] == 125.0

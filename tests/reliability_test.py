"""A workdir nothing can corrupt, and no silent nonsense (issue 16): checked
configs, the workdir lock, safe resume, checkpoint fallback, the non-finite
guard and the divergence warning. Each test reproduces a defect of the old
code (named in its docstring) and checks what happens now."""
import collections
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from tests import helpers
from tests.train_test import _latest_state, _tiny_config
from wsabie_jax import methods
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.core import evaluation, metrics
from wsabie_jax.data import batching
from wsabie_jax.api import run
from wsabie_jax.training import checkpoints, recorder, settings as run_settings, workdir as workdir_lib

pytestmark = pytest.mark.slow  # trainings killed, resumed and corrupted

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize('field,value,says', [
    ('loss.num_draws', 0, 'config.loss.num_draws=0 must be ≥ 1'),      # JAX: argmax of empty
    ('train.batch_size', 0, 'config.train.batch_size=0 must be ≥ 1'),  # ZeroDivisionError
    ('optim.learning_rate', 0.0, 'config.optim.learning_rate=0.0 must be > 0'),
    ('optim.learning_rate', float('nan'), "expected float or 'auto'"),
    ('loss.kind', 'wrap', "config.loss.kind='wrap' is not one of"),
    ('model.dim', 2.5, 'config.model.dim=2.5: expected int'),
    ('train.bogus', 1, "config.train: unknown field(s) ['bogus']; valid: ['batch_size'"),
    ('data.validation_fraction', 1.0, 'config.data.validation_fraction=1.0 must be in [0, 1)'),
    ('eval.ks', (0, 5), 'config.eval.ks=(0, 5) must be positive ranks'),
    ('train.plan_packs', 'gpu', "config.train.plan_packs='gpu' is not one of"),
])
def test_bad_config_value_is_one_line_and_creates_no_workdir(tmp_path, field, value, says):
  config = _tiny_config()
  section, key = field.split('.')
  values = config[section].to_dict()
  values[key] = value  # as a config file may write it (overrides are type-checked already)
  config[section] = ml_collections.ConfigDict(values)
  workdir = tmp_path / 'run'
  with pytest.raises(ConfigError) as error:
    run.train_and_evaluate(config, workdir)
  assert says in str(error.value) and '\n' not in str(error.value)
  assert not workdir.exists()


def test_every_method_config_passes_the_checks():
  for name in methods.REGISTRY:
    methods.check(methods.get(name).base_config())


def _cli(*args, timeout=300):
  env = helpers.one_device_env()
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=timeout)


def test_unknown_override_key_is_one_line_listing_the_valid_ones(tmp_path):
  """Not a 53-line ml_collections traceback."""
  out = _cli('launch/train.py', '--config=configs/wsabie_synthetic.py:small',
             f'--workdir={tmp_path / "run"}', '--config.train.bogus=1')
  assert out.returncode == 1
  valid = sorted(f.name for f in dataclasses.fields(run_settings.TrainConfig))
  assert out.stderr.strip().splitlines() == [
      f"error: --config.train.bogus: config.train has no field 'bogus'; valid: {', '.join(valid)}"]
  assert not (tmp_path / 'run').exists()


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
  """A finished tiny run: 24 steps, checkpoints at 16 and 24, best at two steps."""
  workdir = tmp_path_factory.mktemp('finished') / 'run'
  config = _tiny_config(max_steps=24, eval_every_steps=4, checkpoint_every_steps=8, patience=100)
  metrics_ = run.train_and_evaluate(config, workdir)
  return workdir, config, metrics_


def _snapshot(workdir: pathlib.Path) -> dict:
  """Every file of the run (the lock aside) with its time and bytes."""
  return {str(p.relative_to(workdir)): (p.stat().st_mtime_ns, p.read_bytes())
          for p in sorted(workdir.rglob('*')) if p.is_file() and p.name != 'LOCK'}


def test_second_run_in_a_busy_workdir_is_refused(finished, tmp_path):
  """Two runs in one workdir both proceeded (interleaved history, one died in Orbax)."""
  workdir, config, _ = finished
  before = _snapshot(workdir)
  with workdir_lib.Lock(workdir):  # another run holds it (flock is per open file)
    with pytest.raises(workdir_lib.WorkdirError, match=rf'in use by pid {os.getpid()} on host'):
      run.train_and_evaluate(config, workdir)
    # read-only use stays allowed while it runs
    assert run.Restored(workdir).evaluate()['p@1'] >= 0
  assert _snapshot(workdir) == before


def test_stale_lock_of_a_killed_run_is_reported_and_taken_over(tmp_path, caplog):
  dead = subprocess.Popen([sys.executable, '-c', 'pass'])
  dead.wait()
  workdir = tmp_path / 'run'
  workdir.mkdir()
  (workdir / 'LOCK').write_text(json.dumps({'pid': dead.pid, 'host': os.uname().nodename,
                                            'started': 'then'}))
  with caplog.at_level(logging.WARNING, 'wsabie_jax'):
    with workdir_lib.Lock(workdir):
      assert json.loads((workdir / 'LOCK').read_text())['pid'] == os.getpid()
  assert f'stale lock in {workdir}: pid {dead.pid}' in caplog.text
  assert (workdir / 'LOCK').read_text() == ''  # released


def test_resume_with_a_changed_shape_is_refused_before_anything_is_written(finished):
  """--config.model.dim=32 on a dim-64 workdir overwrote config.json, then died in
  Orbax, and evaluate.py failed on the once-good workdir afterwards."""
  workdir, config, metrics_ = finished
  before = _snapshot(workdir)
  changed = _tiny_config(max_steps=24, eval_every_steps=4, checkpoint_every_steps=8,
                         patience=100)
  changed.model.dim, changed.loss.margin = 4, 0.5
  with pytest.raises(workdir_lib.WorkdirError) as error:
    run.train_and_evaluate(changed, workdir)
  assert 'loss.margin (1.0 → 0.5), model.dim (8 → 4)' in str(error.value)
  assert _snapshot(workdir) == before
  assert run.Restored(workdir).evaluate()['p@1'] == pytest.approx(metrics_['p@1'])


def test_force_new_moves_the_old_run_aside(tmp_path):
  workdir = tmp_path / 'run'
  run.train_and_evaluate(_tiny_config(max_steps=4), workdir)
  changed = _tiny_config(max_steps=4)
  changed.model.dim = 4
  run.train_and_evaluate(changed, workdir, force_new=True)
  (aside,) = tmp_path.glob('run.old-*')
  assert json.loads((aside / 'config.json').read_text())['model']['dim'] == 8
  assert (aside / 'metrics.json').exists() and not (aside / 'LOCK').exists()
  assert json.loads((workdir / 'config.json').read_text())['model']['dim'] == 4


def _corrupt(step_dir: pathlib.Path, kind: str):
  """Truncates half of the largest array file ('data') or the array metadata."""
  if kind == 'data':
    target = max((p for p in (step_dir / 'state').rglob('*') if p.is_file()
                  and p.parent.name == 'd'), key=lambda p: p.stat().st_size)
  else:
    target = step_dir / 'state' / '_METADATA'
  data = target.read_bytes()
  target.write_bytes(data[:len(data) // 2])


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')  # Orbax's abandoned reads
@pytest.mark.parametrize('kind', ['data', 'metadata'])
def test_corrupt_latest_checkpoint_falls_back_to_the_older_one(tmp_path, kind, caplog):
  """A truncated data file crashed with ValueError: OUT_OF_RANGE (151 lines), a
  truncated metadata file with a bare JSONDecodeError. Now: fall back to step 16,
  replay, and end with the parameters of an uninterrupted run."""
  settings = dict(eval_every_steps=4, checkpoint_every_steps=8, patience=100, deterministic=True)
  straight = _tiny_config(max_steps=32, **settings)
  run.train_and_evaluate(straight, tmp_path / 'a')
  run.train_and_evaluate(_tiny_config(max_steps=24, **settings), tmp_path / 'b')
  _corrupt(tmp_path / 'b' / 'checkpoints' / '24', kind)
  with caplog.at_level(logging.WARNING, 'wsabie_jax'):
    run.train_and_evaluate(straight, tmp_path / 'b')
  assert 'checkpoints/24 is unreadable' in caplog.text
  (moved,) = (tmp_path / 'b' / 'corrupt').iterdir()
  assert moved.name.startswith('checkpoints-24-')
  a, _ = _latest_state(tmp_path / 'a', straight)
  b, _ = _latest_state(tmp_path / 'b', straight)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')  # Orbax's abandoned reads
def test_corrupt_best_falls_back_to_the_previous_best(finished, tmp_path):
  """A truncated best/ crashed evaluate.py; now it evaluates the previous best."""
  source, config, _ = finished
  workdir = tmp_path / 'run'
  shutil.copytree(source, workdir)
  steps = sorted(int(p.name) for p in (workdir / 'best').iterdir() if p.name.isdigit())
  assert len(steps) == 2
  _corrupt(workdir / 'best' / str(steps[1]), 'data')
  restored = run.Restored(workdir)
  assert int(restored.state.step) == steps[0]
  assert restored.evaluate()['p@1'] >= 0
  assert (workdir / 'best' / str(steps[1])).exists()  # read-only use moves nothing


def test_unreadable_checkpoints_everywhere_is_an_error_naming_each(finished, tmp_path):
  source, config, _ = finished
  workdir = tmp_path / 'run'
  shutil.copytree(source, workdir)
  for step_dir in (workdir / 'checkpoints').iterdir():
    _corrupt(step_dir, 'metadata')
  ckpts = checkpoints.Checkpoints(workdir)
  like = methods.get('wsabie').init_state(config, 200, 40)
  with pytest.raises(checkpoints.CheckpointError, match=r'step 24: .*; step 16: '):
    ckpts.restore(ckpts.latest, like)
  ckpts.close()


def test_metrics_refuse_non_finite_scores():
  """NaN scores compared false, so a NaN model ranked every positive first (p@1 3.5)."""
  rng = np.random.default_rng(0)
  ds_images = batching.PaddedImages(np.zeros((4, 1), np.int32), np.ones((4, 1), np.float32),
                                    np.array([[0], [1], [2], [3]], np.int32),
                                    np.ones(4, np.int32))
  W = rng.normal(size=(5, 3)).astype(np.float32)
  ok = evaluation.evaluate_ranking(lambda i, v: jnp.ones((len(i), 3)), jnp.asarray(W), ds_images)
  assert 0 <= ok['p@1'] <= 1
  W[2, 1] = np.nan
  with pytest.raises(metrics.NonFiniteScores, match='1 of 15 values of the label embeddings'):
    evaluation.evaluate_ranking(lambda i, v: jnp.ones((len(i), 3)), jnp.asarray(W), ds_images)
  with pytest.raises(metrics.NonFiniteScores, match='image embeddings'):
    evaluation.evaluate_ranking(lambda i, v: jnp.full((len(i), 3), jnp.inf),
                                jnp.asarray(np.ones((5, 3), np.float32)), ds_images)


def test_divergence_warning_after_three_validations_below_the_baseline(tmp_path, caplog):
  """learning_rate=1e6 'completed' with p@1 0.002 (baseline 0.09) and no warning."""
  rec = recorder.Recorder(tmp_path, 'p@1', patience=100, summaries=_NoSummaries())
  with caplog.at_level(logging.WARNING, 'wsabie_jax'):
    for step, p1 in enumerate([0.05, 0.2, 0.01, 0.02, 0.01], 1):
      rec.validation(step, {'p@1': p1, 'freq_p@1': 0.09}, 0.0)
      assert ('below the frequency baseline' in caplog.text) == (step == 5)
    rec.warn_if_below_baseline({'p@1': 0.002, 'freq_p@1': 0.09}, 'test')
  assert 'test p@1 0.0020 is below the frequency baseline (0.0900)' in caplog.text


class _NoSummaries:
  def scalars(self, *args):
    pass


def test_annotating_an_empty_file_is_an_error(finished, tmp_path):
  """annotate.py on an empty input exited 0 saying nothing."""
  from wsabie_jax.api import annotate
  workdir, _, _ = finished
  restored = run.Restored(workdir)
  empty = tmp_path / 'empty.txt'
  empty.write_text('')
  with pytest.raises(ValueError, match='no examples to annotate'):
    annotate.read_input(str(empty), restored.config, restored.vocab)


def test_progress_line_is_cleared_before_a_log_record_on_a_terminal():
  """The progress bar and log lines were glued together on a terminal."""
  import io
  from wsabie_jax.training.progress import Progress

  class Terminal(io.StringIO):
    def isatty(self):
      return True

  term = Terminal()
  handler = logging.StreamHandler(term)
  logging.getLogger().addHandler(handler)
  try:
    progress = Progress(100, 10, stream=term)
    progress.update(1)
    progress.update(2)
    logging.getLogger('wsabie_jax').warning('a record')
    progress.update(3)  # redrawn at once, not after the 0.2 s interval
    progress.close()
  finally:
    logging.getLogger().removeHandler(handler)
  text = term.getvalue()
  assert text.startswith('\r\x1b[Ka record\n\rstep 3/100 ['), repr(text)


def test_progress_follows_a_time_budget_that_ends_first():
  """With max_seconds and a huge step count (num_epochs=10**6), the bar showed
  'step 1512/27000000 … eta 2591:31'; it follows the budget now."""
  import io
  from tests import helpers
  from wsabie_jax.training.progress import Progress
  out, clock = io.StringIO(), helpers.FakeClock()
  progress = Progress(10**6, 10, stream=out, every_seconds=0.0, budget_seconds=2.0, clock=clock)
  progress.update(0)
  clock.advance(1.0)
  progress.update(100)
  progress.close()
  line = out.getvalue().splitlines()[-1]
  assert line.startswith('step 100 [') and 'eta 0:01' in line, line
  steps = io.StringIO()
  progress = Progress(200, 10, stream=steps, every_seconds=0.0, budget_seconds=1000.0)
  progress.update(0)
  progress.update(100)
  assert steps.getvalue().startswith('step 100/200 [##########.........'), steps.getvalue()


def test_a_run_stopped_before_its_first_checkpoint_may_change_its_config(tmp_path):
  """A data error leaves no workdir (the data are read before anything is
  written); a kill while starting leaves config.json and no checkpoint: the
  fixed config must not be refused as a different run."""
  workdir = tmp_path / 'run'
  from wsabie_jax.data import settings as data_config
  from wsabie_jax.data import DataError
  bad = _tiny_config(max_steps=4)
  bad.data = data_config.file_data('libsvm', str(tmp_path / 'typo.txt'), str(tmp_path / 'test.txt'))
  with pytest.raises(DataError, match='typo.txt: file not found'):
    run.train_and_evaluate(bad, workdir)
  assert not workdir.exists()
  workdir.mkdir()
  workdir_lib.mark(workdir)  # killed while starting: the mark, then config.json
  (workdir / 'config.json').write_text(bad.to_json_best_effort())
  assert not workdir_lib.holds_a_run(workdir)
  run.train_and_evaluate(_tiny_config(max_steps=4), workdir)
  assert json.loads((workdir / 'config.json').read_text())['data']['kind'] == 'synthetic'


def test_a_checkpoint_written_before_the_state_held_its_rate_restores(tmp_path):
  """A checkpoint of a state without `rate_scale` (written before the rate
  was a value of the state) restores every array it has, bit for bit, and
  takes the rest from the state it is restored into; one whose arrays
  differ in shape is still refused."""
  config = _tiny_config()
  state = methods.get('wsabie').init_state(config, 50, 20)
  Older = collections.namedtuple('TrainState', [f for f in state._fields if f != 'rate_scale'])
  older = Older(*(getattr(state, f) for f in Older._fields))._replace(
      step=jnp.int32(5), acc_V_d=state.acc_V_d + 1.0)
  ckpts = checkpoints.Checkpoints(tmp_path)
  ckpts.save(ckpts.latest, older, {'best_step': 5})
  restored, record = ckpts.restore(ckpts.latest, state)
  assert record == {'best_step': 5} and int(restored.step) == 5
  np.testing.assert_array_equal(restored.acc_V_d, older.acc_V_d)
  assert float(restored.rate_scale) == 1.0
  wider = methods.get('wsabie').init_state(config, 60, 20)
  with pytest.raises(checkpoints.CheckpointError, match='step 5'):
    ckpts.restore(ckpts.latest, wider)
  ckpts.close()

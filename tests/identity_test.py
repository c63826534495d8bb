"""A run that knows what it was trained on (issue 38): checksummed
checkpoints, a workdir bound to its data and config, sizes checked before
anything is written, interrupts that save, clean input. Each test names the
defect of the old code it reproduces."""
import asyncio
import json
import logging
import os
import pathlib
import pickle
import shutil
import sys
import types
import warnings

import jax
import ml_collections
import numpy as np
import pytest

from tests.train_test import _tiny_config
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.data import DataError, dataset, libsvm, mulan
from wsabie_jax.api import annotate, configs, run
from wsabie_jax.methods import wsabie
from wsabie_jax.training import checkpoints, identity, parallel, workdir as workdir_lib
from wsabie_jax.training.workdir import WorkdirError

ROOT = pathlib.Path(__file__).resolve().parents[1]


# --- checksummed checkpoints -------------------------------------------------

def _two_checkpoints(workdir):
  """Steps 0 and 1 of a small WSABIE state; returns (state at 1, like)."""
  state0 = wsabie.init_state(configs.load('wsabie_synthetic:small'), 50, 30)
  state1 = state0._replace(step=state0.step + 1,
                           params=jax.tree.map(lambda x: x + 0.5, state0.params))
  ckpts = checkpoints.Checkpoints(workdir)
  ckpts.save(ckpts.latest, state0, {'at': 0})
  ckpts.save(ckpts.latest, state1, {'at': 1})
  ckpts.close()
  return state1, state0


def _restore(workdir, like):
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    return ckpts.restore(ckpts.latest, like)
  finally:
    ckpts.close()


def _same(a, b) -> bool:
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')  # Orbax's abandoned reads
def test_a_flipped_byte_anywhere_in_the_arrays_is_never_used(tmp_path):
  """4–64 overwritten bytes in an array file must not restore as a different,
  finite model (one read MAP 0.2438 for 0.2445, exit 0). Every data file of the newest
  checkpoint gets a byte flipped at 8 places in turn: each restore either
  falls back to step 0 or returns step 1's exact values."""
  saved, like = _two_checkpoints(tmp_path / 'clean')
  files = [p for p in (tmp_path / 'clean/checkpoints/1/state').rglob('*')
           if p.is_file() and p.parent.name == 'd']
  assert files
  fell_back = 0
  for f in files:
    size = f.stat().st_size
    for offset in sorted({int(size * k / 8) for k in range(8)}):
      shutil.rmtree(tmp_path / 'w', ignore_errors=True)
      shutil.copytree(tmp_path / 'clean', tmp_path / 'w')
      target = tmp_path / 'w' / f.relative_to(tmp_path / 'clean')
      data = bytearray(target.read_bytes())
      data[offset] ^= 0xFF
      target.write_bytes(bytes(data))
      state, record = _restore(tmp_path / 'w', like)
      if int(state.step) == 1:
        assert _same(state, saved) and record == {'at': 1}, (f.name, offset)
      else:
        fell_back += 1
        assert _same(state, like) and record == {'at': 0}
  # The largest file holds the tables: a flip inside it must be noticed.
  assert fell_back >= 6


def test_each_array_and_the_record_are_checked(tmp_path):
  """A changed value in any one array, or in the record, fails verification
  naming it (the digests cover every leaf, not only the tables)."""
  saved, _ = _two_checkpoints(tmp_path)
  record = json.loads((tmp_path / 'checkpoints/1/record/metadata').read_text())
  assert checkpoints.verify(saved, record) == {'at': 1}
  leaves, tree = jax.tree_util.tree_flatten_with_path(saved)
  for i, (path, leaf) in enumerate(leaves):
    changed = [np.asarray(x) for _, x in leaves]
    flat = changed[i].reshape(-1).copy()
    flat.view(np.uint8)[0] ^= 1
    changed[i] = flat.reshape(changed[i].shape)
    with pytest.raises(ValueError, match=rf'array state{jax.tree_util.keystr(path)}'):
      checkpoints.verify(jax.tree_util.tree_unflatten(tree, changed), record)
  with pytest.raises(ValueError, match='loop record'):
    checkpoints.verify(saved, dict(record, at=2))


def test_an_edited_record_falls_back(tmp_path):
  _, like = _two_checkpoints(tmp_path)
  path = tmp_path / 'checkpoints/1/record/metadata'
  path.write_text(path.read_text().replace('"at": 1', '"at": 7'))
  state, record = _restore(tmp_path, like)
  assert int(state.step) == 0 and record == {'at': 0}


def test_a_full_disk_while_saving_is_one_line(tmp_path, monkeypatch):
  """Not 630 lines of Orbax tracebacks."""
  state, _ = _two_checkpoints(tmp_path)
  ckpts = checkpoints.Checkpoints(tmp_path)

  def full(*args, **kwargs):
    raise RuntimeError('tensorstore write failed') from OSError(28, 'No space left on device')

  monkeypatch.setattr(ckpts.latest, 'save', full)
  with pytest.raises(checkpoints.CheckpointError) as error:
    ckpts.save(ckpts.latest, state._replace(step=state.step + 1), {})
  assert str(error.value) == (f'cannot write checkpoint {tmp_path}/checkpoints/2: no space left on '
                              'the device; make room and rerun the same command to resume from '
                              'checkpoint 1')
  monkeypatch.undo()
  ckpts.close()


def _orbax_error(message: str) -> logging.LogRecord:
  try:
    raise ValueError(message)
  except ValueError:
    exc_info = sys.exc_info()
  return logging.LogRecord('absl', logging.ERROR, '/site-packages/orbax/checkpoint/future.py',
                           387, 'raised: %s', (exc_info[1],), exc_info)


def test_orbax_errors_are_held_and_logged_without_their_tracebacks():
  """A save on a full disk logs our one line, not 330–741 lines of Orbax's
  threads' tracebacks before it. Its error records keep their first line and
  wait for the save to end; ours pass at once, traceback and all."""
  held = checkpoints._OrbaxErrorsHeld()
  record = _orbax_error('RESOURCE_EXHAUSTED: Error writing "params"\nmore')
  assert held.filter(record) is False and held.held == [record]
  assert logging.Formatter().format(record) == 'raised: RESOURCE_EXHAUSTED: Error writing "params"'
  try:
    raise ValueError('ours')
  except ValueError:
    ours = logging.LogRecord('absl', logging.ERROR, '/wsabie_jax/loop.py', 1, 'x', None,
                             sys.exc_info())
  assert held.filter(ours) is True and 'Traceback' in logging.Formatter().format(ours)
  warning = logging.LogRecord('absl', logging.WARNING, '/orbax/x.py', 1, 'w', None, None)
  assert held.filter(warning) is True


@pytest.fixture
def saving(tmp_path, monkeypatch):
  """(what is logged, Checkpoints at step 1, its state): Orbax's held errors
  reset, the log read at the root as a user sees it."""
  seen = []
  handler = logging.Handler()
  handler.emit = lambda record: seen.append(record.getMessage())
  logging.getLogger().addHandler(handler)
  monkeypatch.setattr(checkpoints.ORBAX_ERRORS, 'explained', False)
  state, _ = _two_checkpoints(tmp_path)
  ckpts = checkpoints.Checkpoints(tmp_path)
  yield seen, ckpts, state._replace(step=state.step + 1)
  logging.getLogger().removeHandler(handler)
  monkeypatch.undo()
  ckpts.close()


def _save_logging(message: str, raises: BaseException):
  """A stand-in for Orbax's save: logs its error record, then raises."""
  def save(*args, **kwargs):
    logging.getLogger('absl').handle(_orbax_error(message))
    raise raises
  return save


def test_orbax_errors_a_save_explains_are_dropped_others_are_logged(saving, monkeypatch):
  """A save failing other than on a full disk logs Orbax's records before its
  traceback (nothing lost), as `release` does at exit. One that fails on a
  full disk says so in one line: Orbax's 4 records of the same cause are
  dropped, and so is asyncio's later word on Orbax's abandoned writes."""
  seen, ckpts, state = saving
  written = 'RESOURCE_EXHAUSTED: Error writing "V"\ntb'
  bug = RuntimeError('tensorstore write failed')
  bug.__cause__ = ValueError('a bug')
  monkeypatch.setattr(ckpts.latest, 'save', _save_logging(written, bug))
  with pytest.raises(RuntimeError, match='tensorstore write failed'):
    ckpts.save(ckpts.latest, state, {})
  assert seen == ['raised: RESOURCE_EXHAUSTED: Error writing "V"']
  full = RuntimeError('tensorstore write failed')
  full.__cause__ = OSError(28, 'No space left on device')
  monkeypatch.setattr(ckpts.latest, 'save', _save_logging(written, full))
  with pytest.raises(checkpoints.CheckpointError):
    ckpts.save(ckpts.latest, state, {})
  echo = logging.LogRecord('asyncio', logging.ERROR, '/asyncio/base_events.py', 1771,
                           'Task exception was never retrieved\nfuture: <Task coro=<write() '
                           'defined at /site-packages/orbax/checkpoint/x.py:188>>', None, None)
  future = logging.LogRecord('asyncio', logging.ERROR, '/asyncio/base_events.py', 1771,
                             "Future exception was never retrieved\nfuture: <Future finished "
                             "exception=ValueError('Error writing \"/w/checkpoints/2.orbax-"
                             "checkpoint-tmp/x\"')>", None, None)
  for record in (echo, future):
    logging.getLogger('asyncio').handle(record)
  assert len(seen) == 1 and checkpoints.ORBAX_ERRORS.held == []


def test_a_damaged_checkpoints_abandoned_reads_are_one_line_and_no_warning(saving):
  """After `restore` falls back from a damaged checkpoint in one line,
  asyncio's 'Future exception was never retrieved' (the read's DATA_LOSS and
  its 3 kB TensorStore spec, with a traceback) and Python's warning
  "coroutine 'Store._get_array_metadatas' was never awaited" (Orbax's reads
  left unstarted) do not follow it: the first is held and cut to its first
  line; the second is not shown; other RuntimeWarnings are."""
  seen, _, _ = saving
  future = logging.LogRecord(
      'asyncio', logging.ERROR, '/asyncio/base_events.py', 1771,
      "Future exception was never retrieved\nfuture: <Future finished exception=ValueError("
      "'DATA_LOSS: Error reading \"V/.zarray\" in OCDBT database [tensorstore_spec=\\'{}\\']')>",
      None, None)
  logging.getLogger('asyncio').handle(future)
  assert seen == []
  checkpoints.ORBAX_ERRORS.release()
  assert seen == ['Future exception was never retrieved']
  with warnings.catch_warnings(record=True) as shown:  # (the filters as Checkpoints left them)
    warnings.warn("coroutine 'Store._get_array_metadatas' was never awaited", RuntimeWarning)
    warnings.warn("coroutine 'mine' was never awaited", RuntimeWarning)
  assert [str(w.message) for w in shown] == ["coroutine 'mine' was never awaited"]


def test_a_save_cut_short_by_a_second_ctrl_c_is_not_reported_by_orbax(saving, monkeypatch):
  """Two Ctrl-C, the second during a save, print 'error: interrupted (SIGINT)'
  without Orbax's 'Save Finalize thread (save_finalize) failed' before it."""
  seen, ckpts, state = saving
  monkeypatch.setattr(ckpts.latest, 'save', _save_logging(
      'Save Finalize thread (save_finalize) failed.', KeyboardInterrupt()))
  with pytest.raises(KeyboardInterrupt):
    ckpts.save(ckpts.latest, state, {})
  checkpoints.ORBAX_ERRORS.release()
  assert seen == []


def test_event_loop_closed_after_a_failed_save_is_silenced():
  """After a save fails on a full disk, TensorStore's callbacks wake the event
  loop Orbax has closed: 0–6 'Event loop is closed' tracebacks of 6 lines
  each, through sys.unraisablehook with no object. Those are told
  apart (and silenced); the same words raised elsewhere are not."""
  loop = asyncio.new_event_loop()
  loop.close()
  with pytest.raises(RuntimeError) as closed:
    loop.call_soon_threadsafe(print)
  unraisable = lambda error, tb: types.SimpleNamespace(
      exc_type=type(error), exc_value=error, exc_traceback=tb, err_msg=None, object=None)
  assert checkpoints._orbax_leftover(unraisable(closed.value, closed.tb))
  try:
    raise RuntimeError('Event loop is closed')
  except RuntimeError as other:
    assert not checkpoints._orbax_leftover(unraisable(other, other.__traceback__))
  assert not checkpoints._orbax_leftover(unraisable(ValueError('x'), None))


def test_a_full_disk_at_the_start_is_one_line_naming_the_file(tmp_path, monkeypatch):
  """Not 'No space left on device' with no path, an empty config.json left
  and the same command then refusing the folder as not a run."""
  from wsabie_jax.api import cli
  real_open = open

  def full_open(path, *args, **kwargs):
    f = real_open(path, *args, **kwargs)
    if str(path).endswith('.config.json.tmp'):
      f.close()
      raise OSError(28, 'No space left on device')
    return f

  monkeypatch.setattr(workdir_lib, 'open', full_open, raising=False)
  config = _tiny_config(max_steps=2)
  with pytest.raises(OSError) as error:
    run.train_and_evaluate(config, tmp_path / 'run')
  assert cli.error_line(error.value) == (f'{tmp_path}/run/config.json: No space left on device; '
                                         'free some space (a training run resumes from its last '
                                         'checkpoint)')
  assert not (tmp_path / 'run/config.json').exists()
  monkeypatch.undo()
  run.train_and_evaluate(config, tmp_path / 'run')  # space again: the same command runs
  assert json.loads((tmp_path / 'run/config.json').read_text())['train']['max_steps'] == 2


# --- a run bound to its data and config --------------------------------------

def _libsvm_set(folder: pathlib.Path, seed: int = 0, n_train: int = 300):
  rng = np.random.default_rng(seed)
  folder.mkdir(parents=True, exist_ok=True)
  for name, n in (('train.txt', n_train), ('test.txt', 80)):
    with open(folder / name, 'w') as f:
      for _ in range(n):
        labels = sorted(set(rng.integers(0, 12, size=rng.integers(1, 3)).tolist()))
        feats = sorted(set(rng.integers(0, 40, size=6).tolist()))
        f.write(','.join(map(str, labels)) + ' '
                + ' '.join(f'{j}:{rng.random():.3f}' for j in feats) + '\n')
  (folder / 'labels.txt').write_text(''.join(f'tag{i}\n' for i in range(12)))


def _libsvm_config(data_dir: str, **train):
  c = configs.load(f'wsabie_mulan:libsvm,{data_dir}')
  c.model.dim = 8
  c.model.ensemble_choice = 'validation'  # (not five more runs first: api/fold_choice.py)
  c.train.update(**{**dict(max_steps=20, eval_every_steps=10, checkpoint_every_steps=10,
                           max_seconds=0.0, evals_per_budget=0), **train})
  return c


@pytest.fixture(scope='module')
def libsvm_run(tmp_path_factory):
  """A run on libsvm files given by a path relative to the directory it was started in."""
  base = tmp_path_factory.mktemp('identity')
  _libsvm_set(base / 'data')
  here = os.getcwd()
  os.chdir(base)
  try:
    config = _libsvm_config('data')
    result = run.train_and_evaluate(config, 'run')
  finally:
    os.chdir(here)
  return base, result


def _copy_run(libsvm_run, tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
  """A copy of the fixture's run and its data (its config points at the copy)."""
  base, _ = libsvm_run
  shutil.copytree(base / 'data', tmp_path / 'data')
  shutil.copytree(base / 'run', tmp_path / 'run')
  config = json.loads((tmp_path / 'run/config.json').read_text())
  for key in ('train_path', 'test_path', 'labels_path'):
    config['data'][key] = config['data'][key].replace(str(base), str(tmp_path))
  (tmp_path / 'run/config.json').write_text(json.dumps(config))
  return tmp_path / 'run', tmp_path / 'data'


def test_relative_data_paths_are_kept_absolute(libsvm_run, tmp_path, monkeypatch):
  """config.json keeps no 'data/test.txt', which evaluate.py run from another
  directory would read as that directory's data/test.txt (MAP 0.266, not 0.303)."""
  base, result = libsvm_run
  config = json.loads((base / 'run/config.json').read_text())
  assert config['data']['test_path'] == str(base / 'data/test.txt')
  _libsvm_set(tmp_path / 'data', seed=1)  # another set where the old code would look
  monkeypatch.chdir(tmp_path)
  again = run.Restored(base / 'run').evaluate('test')
  assert again['map'] == pytest.approx(result['map'], abs=1e-6)


def test_evaluate_refuses_changed_data_unless_allowed(libsvm_run, tmp_path):
  workdir, data = _copy_run(libsvm_run, tmp_path)
  with open(data / 'test.txt', 'a') as f:
    f.write('3 1:0.5\n')
  with pytest.raises(WorkdirError, match=r'data.test_path .*test.txt has [\d,]+ bytes, the run '
                     r'was trained on [\d,]+ .*; put the files back, or pass --allow_data_change'):
    run.Restored(workdir)
  assert run.Restored(workdir, allow_data_change=True).evaluate('test')['num_images'] == 81
  # annotate reads neither file: it is not stopped by them
  run.Restored(workdir, reads=('data.labels_path', 'data.featurized_dir'))


def test_resume_refuses_changed_data_before_writing(libsvm_run, tmp_path):
  """Resume after a feature is added to train.txt is refused in a line, not in
  Orbax with 'Requested shape (47,128) … stored (41,128)' and 3 asyncio
  tracebacks; a changed line of the same size is refused too, not trained on."""
  workdir, data = _copy_run(libsvm_run, tmp_path)
  text = (data / 'train.txt').read_text()
  (data / 'train.txt').write_text(text.replace('0.', '1.', 1))  # same size, other contents
  files = lambda: {p: p.stat().st_mtime_ns for p in workdir.rglob('*')
                   if p.is_file() and p.name != 'LOCK'}
  before = files()
  config = _libsvm_config(str(data), max_steps=30)
  with pytest.raises(WorkdirError, match=r'holds a run trained on other data: data.train_path '
                     r'.*train.txt has other contents than the run was trained on \(same size'):
    run.train_and_evaluate(config, workdir)
  assert files() == before
  stored = workdir_lib.stored_identity(workdir)
  now = identity.of_run(identity.absolute_paths(config), workdir_lib.MAY_CHANGE)
  workdir_lib.check_resume(workdir, config, now, allow_data_change=True)  # allowed: passes
  assert identity.data_changes(stored, now) and not identity.config_changes(stored, now)


def test_a_grown_feature_count_names_the_data_not_the_checkpoints(libsvm_run, tmp_path):
  """--allow_data_change with a feature more in train.txt: was Orbax's
  "no readable checkpoint … Requested shape" (35 lines) after vocabulary.json
  had been rewritten; now one error naming both sizes, nothing written."""
  workdir, data = _copy_run(libsvm_run, tmp_path)
  vocab = json.loads((workdir / 'vocabulary.json').read_text())
  with open(data / 'train.txt', 'a') as f:
    f.write(f'0 {vocab["num_features"] + 5}:1\n')
  files = lambda: {p: p.stat().st_mtime_ns for p in workdir.rglob('*')
                   if p.is_file() and p.name != 'LOCK'}
  before = files()
  with pytest.raises(WorkdirError, match=r'the data gives [\d,]+ features and \d+ labels, the '
                     r'run in .* was trained on [\d,]+ and \d+: a model.s tables cannot change'):
    run.train_and_evaluate(_libsvm_config(str(data), max_steps=30), workdir,
                           allow_data_change=True)
  assert files() == before


def test_a_moved_data_set_with_the_same_contents_resumes(libsvm_run, tmp_path):
  workdir, data = _copy_run(libsvm_run, tmp_path)
  shutil.move(data, tmp_path / 'moved')
  config = identity.absolute_paths(_libsvm_config(str(tmp_path / 'moved')))
  workdir_lib.check_resume(workdir, config, identity.of_run(config, workdir_lib.MAY_CHANGE))


def test_a_deleted_config_json_still_guards_the_run(libsvm_run, tmp_path):
  """With config.json deleted, a changed learning rate does not resume the run
  silently with config.json rewritten to say it."""
  workdir, data = _copy_run(libsvm_run, tmp_path)
  (workdir / 'config.json').unlink()
  config = _libsvm_config(str(data))
  config.optim.learning_rate = 0.5
  with pytest.raises(WorkdirError, match=r'different config: optim.learning_rate \(.+ → 0.5\)'):
    run.train_and_evaluate(config, workdir)
  assert not (workdir / 'config.json').exists()


def test_workdirs_that_are_not_runs_are_refused(tmp_path):
  """Not written over: a folder holding the user's own config.json; nor
  --workdir= (the current directory); nor '~/run' made a folder '~'; nor
  another tool's run folder (config.json with train/model/data and
  checkpoints/ckpt-1000.pt; or tensorboard/, history.jsonl and notes.txt)
  counted as ours, its config.json or history.jsonl replaced."""
  folders = {
      'mine': {'config.json': '{"mine": 1}'},
      'notes': {'todo.txt': 'x'},
      'other_tool': {'config.json': '{"train": {}, "model": {}, "data": {}}',
                     'checkpoints/ckpt-1000.pt': 'weights'},
      'other_logs': {'tensorboard/events': 'e', 'history.jsonl': '{"step": 1}\n',
                     'notes.txt': 'mine'},
      'their_mark': {'RUN': 'make run\n', 'LOCK': ''},
  }
  for name, files in folders.items():
    for rel, text in files.items():
      (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
      (tmp_path / name / rel).write_text(text)
  config = _tiny_config(max_steps=2)
  for name, files in folders.items():
    with pytest.raises(WorkdirError, match=r'is not empty and holds no wsabie_jax run \('):
      run.train_and_evaluate(config, tmp_path / name)
    with pytest.raises(WorkdirError, match='holds no wsabie_jax run'):
      workdir_lib.set_aside(tmp_path / name)
    kept = {str(p.relative_to(tmp_path / name)): p.read_text()
            for p in (tmp_path / name).rglob('*') if p.is_file()}
    assert kept == files, name
  for empty in ('', '  ', None):
    with pytest.raises(WorkdirError, match='--workdir is empty'):
      run.train_and_evaluate(config, empty)
  assert workdir_lib.resolve('~/run') == pathlib.Path.home() / 'run'


def test_a_run_is_marked_and_a_marked_or_older_run_is_ours(libsvm_run, tmp_path):
  base, _ = libsvm_run
  assert (base / 'run' / workdir_lib.MARK).is_file()
  workdir, _ = _copy_run(libsvm_run, tmp_path)
  (workdir / workdir_lib.MARK).unlink()  # a run from before the mark: its checkpoints say so
  assert workdir_lib.is_ours(workdir)
  shutil.rmtree(workdir / 'checkpoints')
  shutil.rmtree(workdir / 'best')
  assert workdir_lib.is_ours(workdir)  # ... or its vocabulary.json
  (workdir / 'vocabulary.json').unlink()
  assert not workdir_lib.is_ours(workdir)


def test_a_label_renamed_in_vocabulary_json_is_refused(libsvm_run, tmp_path):
  """"tag1" → "tag3" in vocabulary.json (valid JSON) is refused: annotate.py
  does not print label 1 as tag3, two labels sharing a name, with exit 0."""
  workdir, _ = _copy_run(libsvm_run, tmp_path)
  vocab = json.loads((workdir / 'vocabulary.json').read_text())
  names = workdir_lib.load_vocabulary(workdir)['label_names']
  assert names == vocab['label_names']
  vocab['label_names'][1] = vocab['label_names'][0]
  (workdir / 'vocabulary.json').write_text(json.dumps(vocab))
  with pytest.raises(WorkdirError, match=r'vocabulary.json was changed after the run wrote it'):
    run.Restored(workdir)
  del vocab['sha256']  # a file from before the checksum: taken as it is
  (workdir / 'vocabulary.json').write_text(json.dumps(vocab))
  assert workdir_lib.load_vocabulary(workdir)['label_names'][1] == names[0]


def test_force_new_on_a_symlink_moves_its_target(tmp_path):
  """Not the link itself renamed, the new run beside it."""
  target = tmp_path / 'disk/run'
  target.mkdir(parents=True)
  (target / 'metrics.json').write_text('{}')
  workdir_lib.mark(target)
  link = tmp_path / 'run'
  link.symlink_to(target)
  aside = workdir_lib.set_aside(link)
  assert aside.parent == target.parent and (aside / 'metrics.json').exists()
  assert link.is_symlink() and link.resolve() == target and not any(target.iterdir())


def test_a_failed_start_leaves_no_workdir(tmp_path):
  """A DataError or a size error is raised before config.json is written."""
  (tmp_path / 'data').mkdir()
  _libsvm_set(tmp_path / 'data')
  config = _libsvm_config(str(tmp_path / 'data'))
  config.train.batch_size = 100_000_000  # was a numpy MemoryError
  with pytest.raises(ConfigError, match=r'batch_size=100,000,000 is over 64× the [\d,]+ training'):
    run.train_and_evaluate(config, tmp_path / 'run')
  assert not (tmp_path / 'run').exists()


# --- sizes checked before anything is written --------------------------------

def test_a_stray_huge_id_is_named_with_its_line(tmp_path):
  """Not label id 2,000,000,000 → MemoryError or a 3M-label model, nor feature
  id 900,000,000 → 'Out of memory allocating 460800001024 bytes'."""
  path = tmp_path / 'train.txt'
  path.write_text('0,1 0:1 3:1\n2 1:1\n2000000000 2:1\n')
  with pytest.raises(DataError, match=r'train.txt, line 3: label id 2,000,000,000 implies '
                     r'2,000,000,001 labels but the file uses 4 distinct ids'):
    libsvm.read_libsvm(path)
  path.write_text('0 0:1\n1 900000000:1\n')
  with pytest.raises(DataError, match=r'line 2: feature id 900,000,000 implies'):
    libsvm.read_libsvm(path)
  path.write_text('1 0:1\n0 0:1\n')  # sizes given: gaps are the user's to keep
  assert libsvm.read_libsvm(path, num_labels=5_000_000).num_labels == 5_000_000


def test_a_model_larger_than_the_device_is_refused(monkeypatch):
  shapes = jax.eval_shape(lambda: {'W_YxD': np.zeros((1 << 20, 128), np.float32)})
  monkeypatch.setattr(parallel, 'memory_bytes', lambda device: 512 << 20)
  platform = jax.devices()[0].platform  # the message names the device's kind
  with pytest.raises(ConfigError, match=r"does not fit: 9 labels; its state needs 1.0 GiB "
                     r"\(2× \['W_YxD'\] 1048576×128 \(0.5 GiB\), ...\), the "
                     f"{platform} device 0.5 GiB"):
    parallel.check_fits(shapes, jax.devices()[0], '9 labels')
  monkeypatch.setattr(parallel, 'memory_bytes', lambda device: 2 << 30)
  parallel.check_fits(shapes, jax.devices()[0], '9 labels')


def test_an_empty_validation_split_is_refused(tmp_path):
  """Not 0 validation examples from a 1-line training file, valid_map
  -Infinity in metrics.json and zeros from evaluate --split=valid."""
  (tmp_path / 'data').mkdir()
  _libsvm_set(tmp_path / 'data', n_train=300)
  (tmp_path / 'data/train.txt').write_text('0,11 0:1 39:1\n')
  with pytest.raises(DataError, match=r'the validation split is empty \(1 examples × '
                     r'config.data.validation_fraction=0.1 < 1\)'):
    run.train_and_evaluate(_libsvm_config(str(tmp_path / 'data')), tmp_path / 'run')
  assert not (tmp_path / 'run').exists()


def test_a_negative_seed_is_a_config_error(tmp_path):
  config = _tiny_config()
  config.seed = -1
  with pytest.raises(ConfigError, match='config.seed=-1 must be ≥ 0'):
    run.train_and_evaluate(config, tmp_path / 'run')


# --- input hygiene -----------------------------------------------------------

def test_label_names_bom_blank_and_duplicates(tmp_path):
  """A BOM does not name the first label '\\ufefftag0', a trailing blank line
  adds no label '', duplicates are refused."""
  path = tmp_path / 'labels.txt'
  path.write_bytes('\ufefftag0\ntag1\r\n\n\n'.encode('utf-8'))
  assert dataset.read_label_names(path) == ['tag0', 'tag1']
  path.write_text('tag0\n\ntag2\n')
  with pytest.raises(DataError, match=r'labels.txt, line 2: blank label name'):
    dataset.read_label_names(path)
  path.write_text('tag0\ntag1\ntag0\n')
  with pytest.raises(DataError, match=r"labels.txt, line 3: label name 'tag0' repeats line 1"):
    dataset.read_label_names(path)


def test_bom_in_data_files_is_accepted(tmp_path):
  """Not rejected as a bad token."""
  path = tmp_path / 'train.txt'
  path.write_bytes('\ufeff0,1 0:1 2:0.5\n1 1:1\n'.encode('utf-8'))
  assert libsvm.read_libsvm(path).num_images == 2
  arff = tmp_path / 'set.arff'
  arff.write_bytes(('\ufeff@relation r\n@attribute f0 numeric\n@attribute a {0,1}\n'
                    '@attribute b {0,1}\n@data\n{0 0.5,1 1}\n').encode('utf-8'))
  xml = tmp_path / 'set.xml'
  xml.write_text('<labels xmlns="http://mulan.sourceforge.net/labels"><label name="a"/>'
                 '<label name="b"/></labels>')
  assert mulan.read_arff(arff, xml).label_names == ['a', 'b']


@pytest.mark.parametrize('line', ['0 ²:1', '²,1 0:1', '0 -١:1'])
def test_non_ascii_digits_are_named_with_file_and_line(tmp_path, line):
  """Not "invalid literal for int()" with no file or line."""
  path = tmp_path / 'train.txt'
  path.write_text(f'0 1:1\n{line}\n', encoding='utf-8')
  with pytest.raises(DataError, match=r'train.txt, line 2: '):
    libsvm.read_libsvm(path)


def test_16_bit_and_float_images_are_scaled_not_clipped(tmp_path):
  """Pillow's 8-bit conversion would clip a 16-bit PNG to nearly white and a
  float TIFF in [0, 1] to black."""
  from PIL import Image
  from wsabie_jax.features import visual_terms
  ramp = np.tile(np.linspace(0, 1, 64), (64, 1))
  expected = visual_terms.load_image(_save(Image.fromarray((ramp * 255).astype(np.uint8)),
                                           tmp_path / 'ref.png'), 32)
  wide = Image.fromarray((ramp * 65535).astype(np.uint16))
  floats = Image.fromarray(ramp.astype(np.float32), 'F')
  for image, name in ((wide, 'wide.png'), (floats, 'float.tif')):
    got = visual_terms.load_image(_save(image, tmp_path / name), 32)
    assert np.abs(got - expected).max() < 2 / 255, name


def _save(image, path):
  image.save(path)
  return path


def test_a_truncated_image_is_dropped_not_fatal(tmp_path):
  """A truncated JPEG passes the header check; it must not abort featurising."""
  from PIL import Image
  from wsabie_jax.features import image_folder
  rng = np.random.default_rng(0)
  Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(tmp_path / 'a.jpg')
  data = (tmp_path / 'a.jpg').read_bytes()
  (tmp_path / 'cut.jpg').write_bytes(data[:len(data) // 2])
  kept, dropped = image_folder.screen_images([('a.jpg', ['x']), ('cut.jpg', ['x'])], tmp_path,
                                             10_000_000)
  assert kept == [('a.jpg', ['x'])] and 'cannot read the image' in dropped['cut.jpg']


# --- annotate checks its input against the run -------------------------------

def _run_config(kind: str):
  return ml_collections.ConfigDict({'data': {'kind': kind, 'labels_path': '', 'bias_feature': 0.0,
                                             'feature_base': 0, 'normalize': 'l2',
                                             'train_path': 'train.txt', 'test_path': 'test.txt'}})


def test_annotate_refuses_another_format_or_set(tmp_path):
  """A libsvm file against a Corel5k run is refused, not given confident
  predictions with its true labels mapped to the wrong names (exit 0)."""
  text = tmp_path / 'x.txt'
  text.write_text('0,1 0:1 2:0.5\n')
  vocab = {'num_features': 3, 'label_names': ['a', 'b']}
  with pytest.raises(DataError, match=r'x.txt: the run was trained on mulan data: --input must '
                     r'be a Mulan .arff'):
    annotate.read_input(str(text), _run_config('mulan'), vocab)
  with pytest.raises(DataError, match=r'the run was trained on libsvm data'):
    annotate.read_input(str(_touch(tmp_path / 'y.arff')), _run_config('libsvm'), vocab)
  text.write_text('0,5 0:1\n')  # a label the run does not have
  with pytest.raises(DataError, match=r'line 1: label id out of range \[0, 2\): \[0, 5\]'):
    annotate.read_input(str(text), _run_config('libsvm'), vocab)
  text.write_text('0 7:1\n')  # a feature past the run's
  with pytest.raises(DataError, match=r'line 1: feature id 7 out of range for 3 features'):
    annotate.read_input(str(text), _run_config('libsvm'), vocab)
  with pytest.raises(DataError, match='no such file'):
    annotate.read_input(str(tmp_path / 'none.txt'), _run_config('libsvm'), vocab)


def _touch(path):
  path.write_text('')
  return path


def test_data_error_survives_a_copy():
  """The file, line and reason, not 'DataError.__init__() missing 2 required
  positional arguments' (absl copies errors raised in parsing)."""
  error = DataError('train.txt', 3, 'NaN')
  again = pickle.loads(pickle.dumps(error))
  assert str(again) == 'train.txt, line 3: NaN' and again.line == 3


def test_a_training_file_is_parsed_once(tmp_path, monkeypatch, capsys):
  """Not a 200 MB train.txt parsed three times (config, flags, run: 106 s
  each) with no output for over 6 minutes."""
  from wsabie_jax import data as data_lib
  _libsvm_set(tmp_path)
  calls = []
  real = libsvm.read_libsvm
  monkeypatch.setattr(libsvm, 'read_libsvm', lambda *a, **k: calls.append(a[0]) or real(*a, **k))
  monkeypatch.setattr(libsvm._Progress, 'SHOW_ABOVE_BYTES', 1)
  config = _libsvm_config(str(tmp_path))  # reads train.txt for its sizes
  data_lib.load_splits(config.data)       # as the run does
  assert calls == [str(tmp_path / 'train.txt'), str(tmp_path / 'test.txt')]
  shown = capsys.readouterr().err.splitlines()
  assert shown[-1].startswith(f'reading {tmp_path / "test.txt"}: 100% (') and len(shown) == 20


def test_evaluate_on_what_is_not_a_finished_run_is_one_line(libsvm_run, tmp_path):
  """No checkpoint, no vocabulary.json, no folder: not a ~19-line traceback."""
  workdir, _ = _copy_run(libsvm_run, tmp_path)
  shutil.rmtree(workdir / 'best')
  shutil.rmtree(workdir / 'checkpoints')
  with pytest.raises(WorkdirError, match=r'no checkpoint in .*/best or .*/checkpoints'):
    run.Restored(workdir)
  (workdir / 'vocabulary.json').unlink()
  with pytest.raises(WorkdirError, match=r'vocabulary.json not found: .* is not a training workdir'):
    run.Restored(workdir)
  with pytest.raises(WorkdirError, match=r'--workdir=.*/nowhere: no such folder'):
    run.Restored(tmp_path / 'nowhere')


def test_a_truncated_or_missing_shard_is_named(tmp_path):
  """Not 60–70 lines of numpy/zipfile traceback, the shard unnamed."""
  from wsabie_jax.data import shards, synthetic
  spec = synthetic.SyntheticSpec(num_labels=20, num_features=50, nnz=5)
  meta = shards.write_synthetic(spec, tmp_path, 40, 20, 'train', workers=1)
  shard_set = shards.ShardSet(tmp_path, lambda ds: ds)
  first = tmp_path / meta['shards'][0]['file']
  first.write_bytes(first.read_bytes()[:100])
  with pytest.raises(DataError, match=rf'{first}: shard unreadable \(.*\): write the shards'):
    shard_set.load(0)
  (tmp_path / meta['shards'][1]['file']).unlink()
  with pytest.raises(DataError, match=r'shard missing: write the shards again'):
    shard_set.load(1)


@pytest.mark.parametrize('error,line', [
    (OSError(30, 'Read-only file system', '/w/LOCK'), '/w/LOCK: Read-only file system; the file '
     'system is read-only'),
    (OSError(28, 'No space left on device', '/w/metrics.json'), '/w/metrics.json: No space left '
     'on device; free some space (a training run resumes from its last checkpoint)'),
    (PermissionError(13, 'Permission denied', '/w'), '/w: Permission denied; check its permissions'),
    (OSError(5, 'Input/output error'), None),  # not the user's: a traceback
    (KeyError('x'), None),
])
def test_file_system_errors_are_one_line(error, line):
  """A read-only workdir or a full disk: a line, not an OSError traceback."""
  from wsabie_jax.api import cli
  assert cli.error_line(error) == line


def test_a_run_that_stored_an_older_name_still_resumes_and_loads(tmp_path):
  """model.tables' trace-time choice was once 'auto' (now 'by_size': 'auto'
  means fitted and recorded only): a record or config.json holding it reads as
  the new name, and a real change is still refused."""
  from wsabie_jax.wsabie import settings as wsabie_settings
  now = {'config': {'model.tables': 'by_size', 'model.dim': 8}}
  assert identity.config_changes({'config': {'model.tables': 'auto', 'model.dim': 8}}, now) == []
  assert identity.config_changes({'config': {'model.tables': 'rows', 'model.dim': 8}}, now) == [
      "model.tables ('rows' → 'by_size')"]
  (tmp_path / 'config.json').write_text(json.dumps({'model': {'tables': 'auto', 'dim': 8}}))
  assert workdir_lib.load_config(tmp_path).model.tables == 'by_size'
  with pytest.raises(ValueError, match="'by_size'"):  # a new config names the choice
    wsabie_settings.ModelConfig(tables='auto')

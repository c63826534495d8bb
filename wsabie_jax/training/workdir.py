"""What a training run leaves in its workdir, and how to load it back.

  config.json      the config it ran with
  vocabulary.json  label names, feature count, label parents (for psib@k)
  best/, checkpoints/   Orbax checkpoints (best on validation; latest)
  tensorboard/     summaries
  metrics.json     test metrics of the best checkpoint
  LOCK             held by the training run using it (pid, host, start)
  RUN              the mark that the folder is a wsabie_jax run's (written with
                   config.json): only a folder with it, or an older run's own
                   files, is trained into or moved aside
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import pathlib
import socket
import time

import ml_collections
import numpy as np

from wsabie_jax.training import checkpoints, identity, settings

log = logging.getLogger('wsabie_jax')


def write_file(path, text: str) -> None:
  """Writes `path` whole or not at all (a temporary file renamed over it): a
  full disk leaves the old file or none, never an empty one, and its OSError
  names the file."""
  path = pathlib.Path(path)
  tmp = path.with_name(f'.{path.name}.tmp')
  try:
    with open(tmp, 'w') as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except OSError as error:
    tmp.unlink(missing_ok=True)
    raise OSError(error.errno, error.strerror, str(path)) from None


def save_vocabulary(workdir, vocab: dict):
  """vocabulary.json, with a checksum of what it holds: a label renamed in it
  by hand would otherwise be printed by annotate.py as the model's."""
  vocab = {k: v for k, v in vocab.items() if k != 'sha256'}
  write_file(pathlib.Path(workdir) / 'vocabulary.json',
             json.dumps({**vocab, 'sha256': _vocabulary_sum(vocab)}))


def check_sizes(workdir, vocab: dict) -> None:
  """A WorkdirError, naming both, when the data now gives another feature or
  label count than the run's checkpoints were built for (resumed with
  --allow_data_change): the tables cannot change size, and Orbax's shape
  error once blamed the checkpoints, after vocabulary.json was rewritten."""
  workdir = pathlib.Path(workdir)
  saved = workdir / 'checkpoints'
  if not (workdir / 'vocabulary.json').exists() or not saved.is_dir() or not any(saved.iterdir()):
    return
  before = load_vocabulary(workdir)
  was = before['num_features'], len(before['label_names'])
  now = vocab['num_features'], len(vocab['label_names'])
  if was != now:
    raise WorkdirError(f'the data gives {now[0]:,} features and {now[1]:,} labels, the run in '
                       f'{workdir} was trained on {was[0]:,} and {was[1]:,}: a model\'s tables '
                       'cannot change size (--allow_data_change takes changes that keep them); '
                       '--force_new starts a new run')


def _vocabulary_sum(vocab: dict) -> str:
  return hashlib.sha256(json.dumps(vocab, sort_keys=True).encode()).hexdigest()


def load_config(workdir) -> ml_collections.ConfigDict:
  """config.json, with values an older version named otherwise under their new names."""
  return identity.upgraded(ml_collections.ConfigDict(_read_json(workdir, 'config.json')))


def load_vocabulary(workdir) -> dict:
  """vocabulary.json as the run wrote it; a WorkdirError if it was edited since
  (a file from before the checksum is taken as it is)."""
  vocab = _read_json(workdir, 'vocabulary.json')
  stored = vocab.pop('sha256', None)
  if stored is not None and stored != _vocabulary_sum(vocab):
    raise WorkdirError(f'{pathlib.Path(workdir) / "vocabulary.json"} was changed after the run '
                       'wrote it (its checksum differs): its label names would no longer be the '
                       "model's; put back the run's own file")
  if vocab['label_parents'] is not None:
    vocab['label_parents'] = np.asarray(vocab['label_parents'], np.int32)
  return vocab


def _read_json(workdir, name: str) -> dict:
  """A run's JSON file, or a WorkdirError saying why it cannot be read."""
  path = pathlib.Path(workdir) / name
  if not pathlib.Path(workdir).is_dir():
    raise WorkdirError(f'--workdir={workdir}: no such folder')
  if not path.exists():
    raise WorkdirError(f'{path} not found: {workdir} is not a training workdir, or its run '
                       'stopped before it began training')
  try:
    return json.loads(path.read_text())
  except (OSError, ValueError) as error:
    raise WorkdirError(f'{path} is unreadable ({error})') from None


def restore_best(workdir, like_state):
  """(state, record) of the run's model: its refit on the whole training file
  where it made one (train.refit), else the best on validation (the latest
  checkpoint if none was marked best), restored into the shapes of
  `like_state` (methods/ knows how to make one)."""
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    got = ckpts.restore_model(like_state)
  finally:
    ckpts.close()
  if got is None:
    raise WorkdirError(f'no checkpoint in {workdir}/best or {workdir}/checkpoints: the run '
                       'there has not saved one yet (train it first)')
  return got


# --- one run at a time, and only the run the workdir holds ------------------

class WorkdirError(RuntimeError):
  """The workdir cannot take this run (busy, or holds a different run); the
  message says why and what to do. Nothing in the workdir was changed."""


class Lock:
  """An exclusive lock on workdir/LOCK for a training run's lifetime.

  `flock` is released by the kernel when its holder dies, so a run killed with
  SIGKILL never blocks the next one; the file's contents (pid, host, start)
  name the holder. Contents found when the lock is free are a stale lock: its
  run ended without releasing it (killed), which is reported and taken over.
  Release truncates the file (never unlinks it: a waiter holding the old
  inode would lock a file no one else sees). evaluate/annotate take no lock.
  """

  def __init__(self, workdir):
    self.path = pathlib.Path(workdir) / 'LOCK'
    self.fd = None

  def __enter__(self):
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      owner = _read_owner(fd)
      os.close(fd)
      raise WorkdirError(f'{self.path.parent} is in use by {_describe(owner)} (lock file '
                         f'{self.path}): wait for that run to end, or train in another '
                         '--workdir') from None
    previous = _read_owner(fd)
    if previous and previous.get('host') == socket.gethostname() and _alive(previous.get('pid')):
      os.close(fd)  # a file system without working flock: the pid check still holds
      raise WorkdirError(f'{self.path.parent} is in use by {_describe(previous)} (lock file '
                         f'{self.path})')
    if previous:
      log.warning('stale lock in %s: %s ended without releasing it (killed?); taking over',
                  self.path.parent, _describe(previous))
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({'pid': os.getpid(), 'host': socket.gethostname(),
                              'started': time.strftime('%Y-%m-%d %H:%M:%S')}).encode(), 0)
    os.fsync(fd)
    self.fd = fd
    return self

  def __exit__(self, *exc):
    if self.fd is not None:
      os.ftruncate(self.fd, 0)
      fcntl.flock(self.fd, fcntl.LOCK_UN)
      os.close(self.fd)
      self.fd = None


def _read_owner(fd) -> dict:
  text = os.pread(fd, 4096, 0).decode(errors='replace').strip()
  if not text:
    return {}
  try:
    return json.loads(text)
  except json.JSONDecodeError:
    return {'unreadable': text[:80]}


def _is_owner(text: str) -> bool:
  """Whether `text` is what Lock writes (pid, host, started)."""
  try:
    owner = json.loads(text)
  except ValueError:
    return False
  return isinstance(owner, dict) and {'pid', 'host', 'started'} <= set(owner)


def _describe(owner: dict) -> str:
  if not owner or 'pid' not in owner:
    return 'another run'
  return f"pid {owner['pid']} on host {owner.get('host', '?')} (started {owner.get('started', '?')})"


def _alive(pid) -> bool:
  try:
    os.kill(int(pid), 0)
  except (OSError, TypeError, ValueError):
    return False
  return int(pid) != os.getpid()


# Fields a resumed run may change: budgets, schedules of logs/validation/
# checkpoints, devices and how steps are dispatched, evaluation memory. Any
# other difference changes shapes or what is being trained.
# Fields marked MAY_CHANGE in training/settings.py, the methods' scoring
# chunk (memory only), and WSABIE's member chosen on folds, which a resumed
# run reads back from its config.json (api/fold_choice.py).
MAY_CHANGE = settings.MAY_CHANGE_FIELDS | {'loss.label_chunk', 'model.ensemble_choice',
                                           'model.ensemble_pick', 'model.ensemble_choice_seconds'}


def check_resume(workdir, config: ml_collections.ConfigDict, now: dict,
                 allow_data_change: bool = False) -> None:
  """Raises WorkdirError when the workdir holds a run whose config differs from
  `config` in a field outside MAY_CHANGE, naming each such field, or whose
  data files (`now`: identity.of_run) changed since, naming each (unless
  `allow_data_change`: then logged), before anything is written. The run's
  own record (its newest checkpoint's) is what counts; config.json is read
  for runs written before records held it. A workdir holds a run once it has
  a checkpoint or metrics; before that (a run stopped by bad data, or killed
  while starting) its config.json may be replaced."""
  workdir = pathlib.Path(workdir)
  if not holds_a_run(workdir):
    return
  stored = stored_identity(workdir)
  if stored is None:
    stored = {'config': _stored_config(workdir)}
  differ = identity.config_changes(stored, now)
  if differ:
    raise WorkdirError(f'{workdir} holds a run with a different config: {", ".join(differ)}; '
                       'resume with its config, or start afresh with --force_new (the old run '
                       'is moved aside) or another --workdir')
  changed = identity.data_changes(stored, now)
  if changed and not allow_data_change:
    raise WorkdirError(f'{workdir} holds a run trained on other data: {"; ".join(changed)}; '
                       'put the files back, pass --allow_data_change to go on training on '
                       'these, or start afresh with --force_new')
  for change in changed:
    log.warning('resuming on changed data (--allow_data_change): %s', change)


def _stored_config(workdir: pathlib.Path) -> dict:
  """config.json's fields as the record keeps them (a run from before records held them)."""
  path = workdir / 'config.json'
  if not path.exists():
    raise WorkdirError(f'{workdir} holds a run but neither its config.json nor its checkpoints '
                       'say what config it ran with: put config.json back, or start afresh '
                       'with --force_new')
  try:
    stored = json.loads(path.read_text())
  except json.JSONDecodeError as error:
    raise WorkdirError(f'{path} is not readable JSON ({error}): move the workdir aside or '
                       'pass --force_new') from None
  # Fields it lacks (written by an older version) are not compared: config_changes
  # reads the stored fields only.
  return identity.config_fields(ml_collections.ConfigDict(stored), MAY_CHANGE)


def stored_identity(workdir: pathlib.Path) -> dict | None:
  """The `identity` of the newest committed checkpoint's record (latest, else
  best), read off disk; None when there is none or it has none."""
  for folder in ('checkpoints', 'best'):
    root = workdir / folder
    steps = sorted((int(p.name) for p in root.iterdir() if p.name.isdigit()),
                   reverse=True) if root.is_dir() else []
    for step in steps:
      try:  # Orbax's layout: STEP/record/metadata is the JsonSave'd record
        return json.loads((root / str(step) / 'record' / 'metadata').read_text()).get('identity')
      except (OSError, ValueError):
        continue  # unreadable: restore falls back past it the same way
  return None


def holds_a_run(workdir: pathlib.Path) -> bool:
  """Whether the workdir has a checkpoint (latest or best) or test metrics."""
  saved = [p for d in ('checkpoints', 'best') if (workdir / d).is_dir()
           for p in (workdir / d).iterdir() if p.name.isdigit()]
  return bool(saved) or (workdir / 'metrics.json').exists()


MARK = 'RUN'


def mark(workdir) -> None:
  """Marks `workdir` as a run's (train_and_evaluate, with config.json): the
  package and its version."""
  path = pathlib.Path(workdir) / MARK
  if not path.exists():
    try:
      version = importlib.metadata.version('wsabie_jax')
    except importlib.metadata.PackageNotFoundError:
      version = 'unknown'
    write_file(path, json.dumps({'package': 'wsabie_jax', 'version': version,
                                 'created': time.strftime('%Y-%m-%d %H:%M:%S')}) + '\n')


def is_ours(workdir: pathlib.Path) -> bool:
  """Whether `workdir` holds a run of ours: the mark, our LOCK alone (a start
  that stopped before the mark), or (a run from before the mark) a checkpoint record with our identity, or our vocabulary.json. Names
  alone prove nothing: another tool's run folder has a config.json with
  train/model/data sections, a checkpoints/ or a history.jsonl too."""
  if (workdir / MARK).is_file():
    try:  # (a file of another's that happens to be called RUN is not the mark)
      return json.loads((workdir / MARK).read_text()).get('package') == 'wsabie_jax'
    except (OSError, ValueError, AttributeError):
      return False
  if [p.name for p in workdir.iterdir()] == ['LOCK']:
    owner = (workdir / 'LOCK').read_text(errors='replace').strip()
    return not owner or _is_owner(owner)
  if stored_identity(workdir) is not None:
    return True
  try:
    vocab = json.loads((workdir / 'vocabulary.json').read_text())
  except (OSError, ValueError):
    return False
  return isinstance(vocab, dict) and {'label_names', 'num_features'} <= set(vocab)


def resolve(workdir) -> pathlib.Path:
  """The --workdir a user gave, `~` expanded, as an absolute path; a
  WorkdirError for an empty one (which would train into the current folder)."""
  if workdir is None or not str(workdir).strip():
    raise WorkdirError('--workdir is empty: name a folder for the run, e.g. '
                       '--workdir=workdirs/run')
  return pathlib.Path(os.path.abspath(os.path.expanduser(str(workdir))))


def check_for_training(workdir: pathlib.Path) -> None:
  """Raises WorkdirError when `workdir` is a file, or a non-empty folder that
  is not a run of ours (`is_ours`): a run would write over what it holds."""
  if workdir.exists() and not workdir.is_dir():
    raise WorkdirError(f'--workdir={workdir} is a file, not a folder: name a new folder')
  if not workdir.is_dir():
    return
  entries = sorted(p.name for p in workdir.iterdir())
  if entries and not is_ours(workdir):
    shown = ', '.join(entries[:5]) + (', ...' if len(entries) > 5 else '')
    raise WorkdirError(f'--workdir={workdir} is not empty and holds no wsabie_jax run '
                       f'({shown}; no {MARK} file): name a new or empty folder, so that '
                       'nothing of yours is written over')


def set_aside(workdir) -> pathlib.Path | None:
  """Moves a workdir's previous run to WORKDIR.old-TIMESTAMP (nothing is lost;
  refused while a run holds it); returns where it went, None if there was none.
  A symlinked workdir: its target is moved, and made again empty, so the new
  run lands where the link points."""
  workdir = pathlib.Path(workdir)
  link = workdir.is_symlink()
  workdir = workdir.resolve() if link else workdir
  if not workdir.exists() or not any(workdir.iterdir()):
    return None
  check_for_training(workdir)  # (a folder of the user's own is not moved either)
  with Lock(workdir):
    aside = workdir.with_name(f'{workdir.name}.old-{time.strftime("%Y%m%d-%H%M%S")}')
    workdir.rename(aside)
  (aside / 'LOCK').unlink(missing_ok=True)
  if link:
    workdir.mkdir()
  log.info('moved the previous run in %s to %s', workdir, aside)
  return aside

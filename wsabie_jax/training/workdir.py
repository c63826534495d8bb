"""What a training run leaves in its workdir, and how to load it back.

  config.json      the config it ran with
  vocabulary.json  label names, feature count, label parents (for psib@k)
  best/, checkpoints/   Orbax checkpoints (best on validation; latest)
  tensorboard/     summaries
  metrics.json     test metrics of the best checkpoint
  LOCK             held by the training run using it (pid, host, start)
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import pathlib
import socket
import time

import ml_collections
import numpy as np

from wsabie_jax.training import checkpoints

log = logging.getLogger('wsabie_jax')


def save_vocabulary(workdir, vocab: dict):
  (pathlib.Path(workdir) / 'vocabulary.json').write_text(json.dumps(vocab))


def load_config(workdir) -> ml_collections.ConfigDict:
  path = pathlib.Path(workdir) / 'config.json'
  if not path.exists():
    raise FileNotFoundError(f'{path} not found: is {workdir} a training workdir?')
  return ml_collections.ConfigDict(json.loads(path.read_text()))


def load_vocabulary(workdir) -> dict:
  vocab = json.loads((pathlib.Path(workdir) / 'vocabulary.json').read_text())
  if vocab['label_parents'] is not None:
    vocab['label_parents'] = np.asarray(vocab['label_parents'], np.int32)
  return vocab


def restore_best(workdir, like_state):
  """The best-on-validation state (the latest checkpoint if none was marked best),
  restored into the shapes of `like_state` (methods/ knows how to make one)."""
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    got = ckpts.restore_best(like_state)
  finally:
    ckpts.close()
  if got is None:
    raise FileNotFoundError(f'no checkpoint in {workdir}/best or {workdir}/checkpoints')
  return got[0]


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
MAY_CHANGE = frozenset({
    'train.max_seconds', 'train.num_epochs', 'train.max_steps', 'train.log_every_steps',
    'train.eval_every_steps', 'train.evals_per_budget', 'train.checkpoint_every_steps', 'train.patience',
    'train.num_devices', 'train.platform', 'train.steps_per_call', 'train.deterministic',
    'eval.batch_size', 'eval.label_chunk', 'loss.label_chunk'})


def check_resume(workdir, config: ml_collections.ConfigDict) -> None:
  """Raises WorkdirError when the workdir holds a run whose config differs from
  `config` in a field outside MAY_CHANGE, naming each such field (before
  anything is written). A workdir holds a run once it has a checkpoint or
  metrics; before that (a run stopped by bad data, or killed while starting)
  its config.json may be replaced. Fields the stored config lacks (written by
  an older version) are taken to be at their default and not compared."""
  workdir = pathlib.Path(workdir)
  path = workdir / 'config.json'
  if not path.exists() or not holds_a_run(workdir):
    return
  try:
    stored = _flatten(json.loads(path.read_text()))
  except json.JSONDecodeError as error:
    raise WorkdirError(f'{path} is not readable JSON ({error}): move the workdir aside or '
                       'pass --force_new') from None
  now = _flatten(json.loads(config.to_json_best_effort()))
  differ = [f'{key} ({stored[key]!r} → {now.get(key, "absent")!r})'
            for key in sorted(stored) if key not in MAY_CHANGE and now.get(key) != stored[key]]
  if differ:
    raise WorkdirError(f'{workdir} holds a run with a different config: {", ".join(differ)}; '
                       'resume with its config, or start afresh with --force_new (the old run '
                       'is moved aside) or another --workdir')


def holds_a_run(workdir: pathlib.Path) -> bool:
  """Whether the workdir has a checkpoint (latest or best) or test metrics."""
  saved = [p for d in ('checkpoints', 'best') if (workdir / d).is_dir()
           for p in (workdir / d).iterdir() if p.name.isdigit()]
  return bool(saved) or (workdir / 'metrics.json').exists()


def _flatten(tree: dict, prefix: str = '') -> dict:
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(_flatten(value, f'{prefix}{key}.'))
    else:
      out[f'{prefix}{key}'] = value
  return out


def set_aside(workdir) -> pathlib.Path | None:
  """Moves a workdir's previous run to WORKDIR.old-TIMESTAMP (nothing is lost;
  refused while a run holds it); returns where it went, None if there was none."""
  workdir = pathlib.Path(workdir)
  if not workdir.exists() or not any(workdir.iterdir()):
    return None
  with Lock(workdir):
    aside = workdir.with_name(f'{workdir.name}.old-{time.strftime("%Y%m%d-%H%M%S")}')
    workdir.rename(aside)
  (aside / 'LOCK').unlink(missing_ok=True)
  log.info('moved the previous run in %s to %s', workdir, aside)
  return aside

"""Orbax checkpoints: the latest (for resume), the best on validation, and the
model refit on the whole training file where the run made one (train.refit).

Each checkpoint holds the TrainState (params, optimiser rows, RNG key, step)
and a JSON record of the loop: data position, best metric, patience, time.

Each record also holds a CRC-32 of every array of the state and of the record
itself (`digests`), taken from the values being saved: Orbax keeps no
checksums, so a flipped byte inside an array file read back as a different,
still finite model. Restore reads the newest step and, when it is corrupt or
partial (a truncated array file, unreadable metadata, a digest that does not
match), logs which and why and falls back to the next older one. Training then moves the unreadable ones to workdir/corrupt/
(nothing is deleted) and replays from the older step — the batches are a pure
function of the seed and the step, so the result is the same; read-only
users (evaluate, annotate) only fall back.
"""
from __future__ import annotations

import atexit
import copy
import errno
import inspect
import json
import os
import logging
import pathlib
import time
import traceback
import warnings
import zlib

import jax
import numpy as np
import orbax.checkpoint as ocp

from wsabie_jax.core import echoes
from wsabie_jax.training import hosts

log = logging.getLogger('wsabie_jax')


# A state smaller than this is written before training goes on: that takes
# little, while a background write competes with the steps for a few cores.
# A larger state's write overlaps the steps, as Orbax intends. The best of
# such a state is held in host memory until the next latest checkpoint
# (`keep_best`): even waited for, each write slowed the steps after it.
WAIT_BELOW_BYTES = 64 << 20


class CheckpointError(RuntimeError):
  """No readable checkpoint where some exist; the message lists each and why."""


class Checkpoints:

  def __init__(self, workdir, keep: int = 2):
    _hold_orbax_errors()
    echoes.quiet(_orbax_leftover)
    warnings.filterwarnings('ignore', message=ABANDONED_READ, category=RuntimeWarning)
    self.workdir = pathlib.Path(workdir).absolute()
    options = lambda n: ocp.CheckpointManagerOptions(max_to_keep=n, create=True)
    self.latest = ocp.CheckpointManager(self.workdir / 'checkpoints', options=options(keep))
    # Two best: a corrupt newest best falls back to the previous best.
    self.best = ocp.CheckpointManager(self.workdir / 'best', options=options(2))
    self._held_best = None  # (state on the host, record): keep_best's, not yet written
    self._refit = None  # refit/'s manager, opened when a run makes or reads one

  def keep_best(self, state, record: dict):
    """A new best on validation. A state under WAIT_BELOW_BYTES is copied to
    host memory and written by `write_best`, which the loop calls before every
    latest checkpoint and when it ends, so the latest's record never names a
    best that is not on disk; one lost to a kill in between is found again by
    the replay from the latest (resume is exact). A larger state is written now."""
    if _nbytes(state) >= WAIT_BELOW_BYTES:
      self.save(self.best, state, record)
      return
    # A copy: on CPU device_get may alias the buffers the next step donates.
    self._held_best = (jax.tree.map(np.array, jax.device_get(state)), copy.deepcopy(record))

  def write_best(self):
    """Writes the best `keep_best` holds, if any."""
    if self._held_best is not None:
      state, record = self._held_best
      self.save(self.best, state, record)
      self._held_best = None

  @staticmethod
  def save(manager: ocp.CheckpointManager, state, record: dict):
    step = int(jax.device_get(state.step))
    if step in manager.all_steps():  # a replay after a fallback or a kill: already saved
      return
    record = dict(record, digests=digests(state, record))
    try:
      manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                 record=ocp.args.JsonSave(record)), force=True)
      if _nbytes(state) < WAIT_BELOW_BYTES:
        manager.wait_until_finished()
    except KeyboardInterrupt:  # a second Ctrl-C cut the save short: Orbax's errors echo it
      ORBAX_ERRORS.release(drop=True)
      raise
    except Exception as error:  # noqa: BLE001 (Orbax wraps the OSError in several kinds)
      said = _unwritable(error, manager, step)
      ORBAX_ERRORS.release(drop=said is not error)  # our one line says what they said
      raise said from error
    ORBAX_ERRORS.release()
    log.info('saved checkpoint %s/%d', pathlib.Path(manager.directory).name, step)

  def restore(self, manager: ocp.CheckpointManager, like_state, set_aside: bool = False):
    """(state, record) from the manager's newest readable step, None when it is
    empty. `set_aside`: move the unreadable newer steps to workdir/corrupt/."""
    failed = []
    for step in sorted(manager.all_steps(), reverse=True):
      try:
        got = _restore_step(manager, step, like_state)
      except Exception as error:  # noqa: BLE001 (Orbax and its readers raise many kinds)
        ORBAX_ERRORS.release()
        reason = _reason(error)
        log.warning('checkpoint %s/%d is unreadable (%s); trying an older one',
                    manager.directory, step, reason)
        failed.append((step, reason))
        continue
      if failed and set_aside:
        self._set_aside(manager, [s for s, _ in failed])
      if failed:
        log.warning('restored %s/%d instead', manager.directory, step)
      ORBAX_ERRORS.release()
      return got
    if failed:
      raise CheckpointError(f'no readable checkpoint in {manager.directory}: '
                            + '; '.join(f'step {s}: {r}' for s, r in failed))
    return None

  def restore_best(self, like_state):
    """The best-on-validation (state, record); the latest when best/ has none
    readable (logged); None when neither has a checkpoint."""
    try:
      got = self.restore(self.best, like_state)
    except CheckpointError as error:
      log.warning('%s; using the latest checkpoint instead', error)
      got = None
    return got or self.restore(self.latest, like_state)

  @property
  def has_refit(self) -> bool:
    """Whether refit/ holds a saved model (one cut short by a kill does not count)."""
    return (self.workdir / 'refit').is_dir() and bool(self.refit().all_steps())

  def refit(self) -> ocp.CheckpointManager:
    if self._refit is None:
      self._refit = ocp.CheckpointManager(
          self.workdir / 'refit', options=ocp.CheckpointManagerOptions(max_to_keep=1, create=True))
    return self._refit

  def restore_model(self, like_state):
    """The run's model: the refit on the whole training file where the run
    made one (training/refit.py), else the best on validation (`restore_best`)."""
    got = self.restore(self.refit(), like_state) if self.has_refit else None
    return got or self.restore_best(like_state)

  def _set_aside(self, manager, steps):
    manager.wait_until_finished()
    if hosts.is_writer():  # (the others found the same steps unreadable)
      where = self.workdir / 'corrupt'
      where.mkdir(exist_ok=True)
      for step in steps:
        source = pathlib.Path(manager.directory) / str(step)
        target = where / f'{source.parent.name}-{step}-{time.strftime("%Y%m%d-%H%M%S")}'
        source.rename(target)
        log.warning('moved the unreadable checkpoint to %s', target)
    hosts.barrier('wsabie_jax: unreadable checkpoints set aside')
    manager.reload()

  def close(self):
    try:
      for m in (self.latest, self.best, self._refit):
        if m is None:
          continue
        m.wait_until_finished()
        m.close()
    finally:
      ORBAX_ERRORS.release()


def digests(state, record: dict) -> dict:
  """{'record': CRC-32 of the record's JSON, 'state': {leaf path: CRC-32 of its
  bytes}} (this process's copy of each array: the state is replicated)."""
  leaves, _ = jax.tree_util.tree_flatten_with_path(state)
  return {'record': _crc(json.dumps(_without_digests(record), sort_keys=True).encode()),
          'state': {jax.tree_util.keystr(path): _crc(_host_bytes(leaf)) for path, leaf in leaves}}


def verify(state, record: dict) -> dict:
  """The record without its digests; a ValueError naming the first array (or
  the record) whose bytes differ from what was saved. Records written before
  digests were kept pass unchecked."""
  saved = record.get('digests')
  record = _without_digests(record)
  if saved is None:
    return record
  now = digests(state, record)
  if now['record'] != saved['record']:
    raise ValueError('the loop record does not match its checksum')
  for path, crc in saved['state'].items():
    if now['state'].get(path, crc) != crc:
      raise ValueError(f'array state{path} does not match its checksum (bit rot or an edited file)')
  return record


def _without_digests(record: dict) -> dict:
  return {k: v for k, v in record.items() if k != 'digests'}


def _crc(data) -> str:
  return f'{zlib.crc32(data):08x}'


def _host_bytes(leaf) -> memoryview:
  if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
    leaf = leaf.addressable_data(0)  # a replica held by this process
  return memoryview(np.ascontiguousarray(jax.device_get(leaf))).cast('B')


# What a full or read-only disk says, however deep Orbax or TensorStore wrapped it.
_DISK_ERRORS = {errno.ENOSPC: 'no space left on the device', errno.EDQUOT: 'over the disk quota',
                errno.EROFS: 'the file system is read-only', errno.EACCES: 'permission denied'}


def _unwritable(error: Exception, manager, step: int) -> Exception:
  """A CheckpointError in one line when `error` (or one it came from) is a
  full or read-only disk; else `error` itself (a bug keeps its traceback).
  Nothing is lost: the older checkpoints stay, and a rerun resumes there."""
  seen, reason = error, None
  while seen is not None and reason is None:
    if isinstance(seen, OSError) and seen.errno in _DISK_ERRORS:
      reason = _DISK_ERRORS[seen.errno]
    for code, words in _DISK_ERRORS.items():
      if os.strerror(code) in str(seen) or words in str(seen):
        reason = reason or words
    seen = seen.__cause__ or seen.__context__
  if reason is None:
    return error
  kept = [s for s in manager.all_steps() if s != step]
  return CheckpointError(f'cannot write checkpoint {manager.directory}/{step}: {reason}; '
                         'make room and rerun the same command to resume from '
                         + (f'checkpoint {max(kept)}' if kept else 'the start'))


def _nbytes(state) -> int:
  return sum(x.nbytes for x in jax.tree.leaves(state))


def _orbax_leftover(unraisable) -> bool:
  """Orbax's threads, abandoned after a failure, print tracebacks through
  sys.unraisablehook of what was already reported: a failed restore's
  suspended reads ('Exception ignored in <coroutine …>', 60 lines each, at
  exit), and after a failed save TensorStore's callbacks waking the event
  loop Orbax has closed ('RuntimeError: Event loop is closed', 0–6 of them
  at random)."""
  obj, error = unraisable.object, unraisable.exc_value
  if inspect.iscoroutine(obj):
    return 'orbax' in obj.cr_code.co_filename
  if obj is None and isinstance(error, RuntimeError) and str(error) == 'Event loop is closed':
    frames = traceback.extract_tb(unraisable.exc_traceback)
    return any(f.name == 'call_soon_threadsafe' and 'asyncio' in f.filename for f in frames)
  return False


class _OrbaxErrorsHeld(logging.Filter):
  """Orbax's own error records, cut to their first line (their tracebacks
  ran to 330–741 lines on a full disk) and held back until the save or
  restore they belong to ends: `release` logs them then, or drops them where
  our one line says the same (`save` on a full disk: 4 records, each a
  thread's view of the one cause, and later asyncio's '… exception was never
  retrieved' for Orbax's abandoned writes). Held ones left at exit are
  logged."""

  def __init__(self):
    super().__init__()
    self.held: list[logging.LogRecord] = []
    self.explained = False  # a save's failure was said in one line: the rest is its echo

  def filter(self, record):
    if (getattr(record, 'wsabie_released', False) or record.levelno < logging.ERROR
        or not _from_orbax(record)):
      return True
    message = record.getMessage().strip().splitlines()
    record.msg, record.args = (message[0][:300] if message else ''), None
    record.exc_info = record.exc_text = record.stack_info = None
    if not self.explained:
      self.held.append(record)
    return False

  def release(self, drop: bool = False):
    held, self.held = self.held, []
    self.explained = self.explained or drop
    for record in [] if drop else held:
      record.wsabie_released = True
      logging.getLogger(record.name).handle(record)


def _from_orbax(record: logging.LogRecord) -> bool:
  """Orbax's record (absl's logger), or asyncio's about an Orbax task or a
  future of its writes (its message names an .orbax-checkpoint-tmp path) or
  of its reads (a TensorStore spec: a damaged checkpoint's 'DATA_LOSS', some
  3 kB on one line and its traceback, after `restore` said it in one line)."""
  return '/orbax/' in record.pathname or (record.name == 'asyncio' and any(
      word in record.getMessage() for word in ('orbax', 'tensorstore_spec')))


# Orbax's reads of a checkpoint's array metadata, left unstarted when a read
# beside them fails (a damaged file, which `restore` names), warn when they
# are collected (1 restore in 144 of identity_test's flipped bytes); with
# warnings as errors the same event reaches `_orbax_leftover` instead.
ABANDONED_READ = r"coroutine 'Store\._get_array_metadatas' was never awaited"


ORBAX_ERRORS = _OrbaxErrorsHeld()
atexit.register(ORBAX_ERRORS.release)


def _hold_orbax_errors():
  for name in ('absl', 'asyncio'):
    if ORBAX_ERRORS not in logging.getLogger(name).filters:
      logging.getLogger(name).addFilter(ORBAX_ERRORS)


def _reason(error: Exception) -> str:
  lines = str(error).strip().splitlines()
  first = lines[0].split('. See full TensorStore details')[0][:200] if lines else ''
  return f'{type(error).__name__}: {first}' if first else type(error).__name__


# State fields newer than some checkpoints (`_restore_step` restores those without them).
ADDED_FIELDS = ('rate_scale',)


def _restore_step(manager: ocp.CheckpointManager, step: int, like_state):
  def restore_as(tree):
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
    return manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), record=ocp.args.JsonRestore()))

  try:
    got = restore_as(like_state)
  except ValueError as error:
    # Checkpoints written before a state grew a field (the adaptive sampler's
    # lists, the rate's `rate_scale`) lack it: restore the fields they have and
    # keep like_state's value of the rest (the loop sets the rate from the record).
    every = like_state._asdict()
    older = lambda fields: {k: v for k, v in fields.items() if k not in ADDED_FIELDS}
    present = {k: v for k, v in every.items() if v is not None}
    for fields in (present, older(every), older(present)):
      if len(fields) == len(like_state):  # (tried already)
        continue
      try:
        got = restore_as(fields)
        break
      except ValueError:
        continue
    else:
      raise error from None  # the real mismatch (a shape, a dtype), not the fallback's
    state = like_state._replace(**got.state)
    return state, verify(state, got.record)
  if got.record is None:
    raise ValueError('the loop record is missing')
  state = type(like_state)(*got.state) if isinstance(got.state, (list, tuple)) else got.state
  return state, verify(state, got.record)

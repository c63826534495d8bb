"""Several processes (one a host) as one run: start-up, one writer, failing cleanly.

JAX's multi-controller runtime runs the same program on every host; each
process drives its own devices and the collectives join them (parallel.py).
What the runtime leaves to the program:

  start-up    `initialize`: jax.distributed with explicit addresses, or its
              own detection where a cluster sets the environment (Cloud TPU
              pod slices, SLURM, Open MPI), with the timeouts configurable.
  agreeing   `check_same_run`: before anything is read or written, every
              process publishes the run it was started with (config, workdir,
              data digests) and each compares them with process 0's: processes
              started with different settings each stop with one line naming
              the fields, instead of a collective of mismatched shapes aborting
              one and hanging another.
  one writer  the workdir's own files (config, vocabulary, metrics, history,
              summaries, the lock) are process 0's (`is_writer`); `barrier`
              holds the others until it has written. Orbax saves stay
              collective, as Orbax requires.
  failing     a peer that dies leaves the others blocked in a collective that
              never completes, until the runtime aborts them at its heartbeat
              timeout with no message and no cleanup. `Peers` watches: every
              process beats in the coordination service's key-value store, and
              a peer whose beat stops for `timeout` seconds (killed, its host
              gone), or that publishes its own failure (an exception), makes
              the others exit at once with one line naming it, the step and
              the last checkpoint. The runtime's own timeout is set to twice
              ours, so its abort is only the backstop; where it aborts at
              once (process 0 died), last_word.py prints the one line.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import pathlib
import socket
import sys
import threading
import time
import traceback
from typing import Callable

import jax

from wsabie_jax.training import last_word

log = logging.getLogger('wsabie_jax')

# Environment variables that say a launcher started this process as one of
# several: jax.distributed.initialize() reads the rest itself (its cluster
# detection); a single-host run of the same program sets none of them.
_CLUSTERS = {
    'SLURM_NTASKS': 'SLURM',
    'OMPI_COMM_WORLD_SIZE': 'Open MPI',
    'TPU_WORKER_HOSTNAMES': 'a Cloud TPU pod slice',  # comma-separated, one a host
}


def detected_cluster(environ=os.environ) -> str | None:
  """The cluster launcher that started this process as one of several, if any."""
  for variable, name in _CLUSTERS.items():
    value = environ.get(variable, '')
    size = len(value.split(',')) if variable == 'TPU_WORKER_HOSTNAMES' else int(value or 1)
    if value and size > 1:
      return name
  return None


MODES = ('auto', 'on', 'off')


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, mode: str = 'auto',
               initialization_timeout: int = 300, heartbeat_timeout: int = 30) -> bool:
  """Joins this process to the others (jax.distributed.initialize); True when
  it did. `mode` 'auto': with a coordinator address, or where
  `detected_cluster` finds a launcher of several processes (JAX's detection
  fills in the rest); 'on': always (JAX's detection: a Cloud TPU pod slice's
  hosts find each other through its metadata); 'off': never (one process).
  `heartbeat_timeout`: `Peers`'; the runtime's own is twice it."""
  if mode not in MODES:
    raise ValueError(f'--distributed={mode!r}: expected one of {", ".join(MODES)}')
  if mode == 'off':
    return False
  if mode == 'auto' and coordinator_address is None:
    cluster = detected_cluster()
    if cluster is None:
      return False
    log.info('several processes started by %s: joining them (jax.distributed)', cluster)
  if process_id == 0 and coordinator_address:
    _check_port_free(coordinator_address)
  # The runtime aborts in C++ (a 30-line dump) when the processes have not all
  # joined by its timeout: one line first, just before it would.
  last_word.install()
  joined = threading.Event()
  threading.Thread(target=_exit_unless_joined, daemon=True,
                   args=(joined, max(initialization_timeout - 1.0, 0.5), coordinator_address,
                         num_processes)).start()
  try:
    jax.distributed.initialize(coordinator_address, num_processes, process_id,
                               initialization_timeout=initialization_timeout,
                               heartbeat_timeout_seconds=2 * heartbeat_timeout)
  finally:
    joined.set()
  return True


def _check_port_free(address: str) -> None:
  """Process 0 serves the coordinator at `address`: its port in use by another
  program is one line here, not a traceback (and the peers' C++ abort)."""
  host, _, port = address.rpartition(':')
  with socket.socket() as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      s.bind(('' if host in ('', '0.0.0.0', '[::]') else host.strip('[]'), int(port)))
    except OSError as error:
      if error.errno == errno.EADDRINUSE:
        raise Disagree(f'--coordinator_address={address}: port {port} is in use by another '
                       'program; pick a free port (the same on every process)') from None
      # (another host's address: process 0 serves on all interfaces; JAX says what fails)


def _exit_unless_joined(joined: threading.Event, seconds: float, address, count) -> None:
  if not joined.wait(seconds):
    os.write(2, (f'error: the {count or "expected"} processes did not all join at '
                 f'{address or "the detected coordinator"} within {seconds + 1:.0f} s (one not '
                 'started, or a different --coordinator_address or --num_processes on one); '
                 'nothing was written\n').encode())
    os._exit(1)


def is_writer() -> bool:
  """Whether this process writes the workdir's own files (process 0)."""
  return jax.process_index() == 0


def barrier(name: str) -> None:
  """Every process waits here until all have come (a no-op on one)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils
    multihost_utils.sync_global_devices(name)


# How long `check_same_run` waits for the slowest process to say what it runs
# (hashing a new data set's files comes first); a process that died meanwhile
# is named sooner by `Peers`.
AGREE_SECONDS = 600.0


class Disagree(ValueError):
  """The processes of one run were started with different settings."""


def check_same_run(run: dict, timeout: float, *, process: int | None = None,
                   count: int | None = None, client=None,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> None:
  """Publishes `run` ({field: JSON value}: what this process is about to run)
  and waits up to `timeout` seconds for every process's; raises Disagree on
  each process when any differs from process 0's (naming each field with both
  values), or when a process has not published by then (naming it)."""
  count = jax.process_count() if count is None else count
  if count == 1:
    return
  me = jax.process_index() if process is None else process
  client = client or _client()
  client.key_value_set(f'wsabie/run/{me}', json.dumps(run, sort_keys=True))
  deadline = clock() + timeout
  while len(got := dict(client.key_value_dir_get('wsabie/run/'))) < count:
    if clock() >= deadline:
      missing = sorted(set(range(count)) - {int(k.rsplit('/', 1)[1]) for k in got})
      raise Disagree(f'process{"es" * (len(missing) > 1)} {", ".join(map(str, missing))} of '
                     f'{count} did not start the run within {timeout:.0f} s (not launched, or '
                     'stopped before it read its config); start every process of the run')
    sleep(0.1)
  first = json.loads(got['wsabie/run/0'])
  differ = []
  for p in range(1, count):
    other = json.loads(got[f'wsabie/run/{p}'])
    differ += [f'{k} ({first.get(k, "absent")!r} on process 0, {other.get(k, "absent")!r} on '
               f'process {p})' for k in sorted(set(first) | set(other))
               if first.get(k) != other.get(k)]
  if differ:
    shown = '; '.join(differ[:4]) + (f'; and {len(differ) - 4} more' if len(differ) > 4 else '')
    raise Disagree(f'the processes were started with different runs: {shown}; start every '
                   'process with the same flags')


def exit_together(message: str, *, wait: float = 10.0) -> None:
  """Ends every process of a run that all found the same error before
  training (`check_same_run`'s): each prints `error: message` and exits 1,
  process 0 last, after every other has said it is leaving (at most `wait`
  seconds): the coordination service lives in process 0, and a peer still
  exiting when it dies is aborted by the runtime with a stack dump."""
  os.write(2, f'error: {message}\n'.encode())
  try:
    client, count, me = _client(), jax.process_count(), jax.process_index()
    client.key_value_set(f'wsabie/leaving/{me}', '1', allow_overwrite=True)
    deadline = time.monotonic() + wait
    while me == 0 and time.monotonic() < deadline and len(
        client.key_value_dir_get('wsabie/leaving/')) < count:
      time.sleep(0.05)
    if me == 0:
      time.sleep(1.0)  # (the others' own exits, under way)
  except Exception:  # noqa: BLE001 (the service is gone: nothing to wait for)
    pass
  os._exit(1)


# --- where the run is, for the message a failure prints -----------------------

@dataclasses.dataclass
class Whereabouts:
  """The step the loop reached and where its checkpoints go (written by the
  loop, read by `Peers` when it reports a failure, and told to the stderr
  filter that speaks when the runtime aborts: last_word.py)."""
  step: int | None = None
  checkpoints: pathlib.Path | None = None

  def __setattr__(self, name, value):
    super().__setattr__(name, value)
    last_word.tell(name, value)

  def last_checkpoint(self) -> int | None:
    return last_word.last_checkpoint(self.checkpoints)

  def describe(self) -> str:
    """' at step N; the last checkpoint is step M; restart …' (appended to a reason)."""
    return last_word.describe(self.step, self.checkpoints)


WHEREABOUTS = Whereabouts()


# --- the watchdog ---------------------------------------------------------------

def _client():
  """The coordination service's client (jax.distributed keeps it; no public
  accessor exists: Orbax reads it the same way)."""
  from jax._src import distributed
  return distributed.global_state.client


class Peers:
  """A context that watches the other processes of the run (module docstring).

  Inside it a thread beats every `interval` seconds (a counter under
  `wsabie/beat/<process>`) and reads the others' beats and failures. A peer
  that has published a failure, or whose counter has not moved for `timeout`
  seconds, ends this process: the one-line reason on stderr, exit status 1,
  at once (os._exit: the runtime's exit barrier would wait for the dead peer).
  An exception leaving the context is published first (`wsabie/failed/<p>`),
  so the others stop within a beat instead of a timeout, and this process
  exits the same way after the others have read it (or `timeout` passed).
  One process: nothing to watch, nothing done.
  """

  def __init__(self, timeout: float, *, process: int | None = None, count: int | None = None,
               client=None, clock: Callable[[], float] = time.monotonic,
               exit: Callable[[int], None] = os._exit, interval: float | None = None):
    self.me = jax.process_index() if process is None else process
    self.count = jax.process_count() if count is None else count
    self.timeout, self.clock, self._exit = float(timeout), clock, exit
    self.interval = interval if interval is not None else min(1.0, self.timeout / 10)
    self._client = client
    self._beats = 0
    self._seen: dict[int, tuple[str, float]] = {}  # peer -> (its last beat, when it changed)
    self._unreachable_since = None  # when reading the service began failing
    self._stop = threading.Event()
    self._thread = None

  @property
  def client(self):
    if self._client is None:
      self._client = _client()
    return self._client

  def __enter__(self):
    if self.count > 1:
      self.beat()
      self._thread = threading.Thread(target=self._watch, name='peers', daemon=True)
      self._thread.start()
    return self

  def __exit__(self, kind, error, tb):
    if self.count == 1:
      return False
    if isinstance(error, jax.errors.JaxRuntimeError) and self._thread is not None:
      # A collective fails when a peer dies (gloo reads the connection
      # reset): the watchdog names the cause once the peer's silence has
      # lasted `timeout` (it exits then); the runtime's own error would not.
      deadline = self.clock() + self.timeout + 3 * self.interval
      while self._thread.is_alive() and self.clock() < deadline:
        time.sleep(self.interval / 4)
    self._stop.set()
    if error is None or (isinstance(error, SystemExit) and not error.code):
      self._say_done()
      return False
    message = _one_line(error)
    if not isinstance(error, (SystemExit, KeyboardInterrupt)):
      traceback.print_exception(kind, error, tb)
    print(f'error: {message}' if not message.startswith('error:') else message,
          file=sys.stderr, flush=True)
    self.publish_failure(message)
    self._exit(_status(error))
    return False

  # --- one round, testable with a fake client and clock ------------------------

  def beat(self) -> None:
    self._beats += 1
    self.client.key_value_set(f'wsabie/beat/{self.me}', str(self._beats), allow_overwrite=True)

  def verdict(self) -> str | None:
    """Why this process must stop (a peer failed or went silent), else None."""
    now = self.clock()
    try:
      beats = dict(self.client.key_value_dir_get('wsabie/beat/'))
      failures = dict(self.client.key_value_dir_get('wsabie/failed/'))
      done = dict(self.client.key_value_dir_get('wsabie/done/'))
    except Exception as error:  # noqa: BLE001 (the service is process 0's: gone with it)
      if self._unreachable_since is None:
        self._unreachable_since = now
      if now - self._unreachable_since >= self.timeout:
        return (f'process 0 (the coordinator) stopped answering ({_one_line(error)})'
                + WHEREABOUTS.describe())
      return None
    self._unreachable_since = None
    for key, message in sorted(failures.items()):
      peer = int(key.rsplit('/', 1)[1])
      if peer != self.me:
        self.client.key_value_set(f'wsabie/seen/{self.me}', message, allow_overwrite=True)
        reason = message[len('error: '):] if message.startswith('error: ') else message
        return f'process {peer} failed ({reason})' + WHEREABOUTS.describe()
    for peer in range(self.count):
      if peer == self.me or f'wsabie/done/{peer}' in done:
        continue
      beat = beats.get(f'wsabie/beat/{peer}')
      if beat is None or beat != self._seen.get(peer, (None, 0.0))[0]:
        self._seen[peer] = (beat, now)
      elif now - self._seen[peer][1] >= self.timeout:
        return f'process {peer} stopped answering' + WHEREABOUTS.describe()
    return None

  def _say_done(self) -> None:
    """Its beats stop because it finished: a peer still finishing must not
    take the silence for a death."""
    try:
      self.client.key_value_set(f'wsabie/done/{self.me}', '1', allow_overwrite=True)
    except Exception:  # noqa: BLE001 (the service went down: nobody left to tell)
      pass

  def publish_failure(self, message: str) -> None:
    """Tells the others this process failed; waits (up to `timeout`) until
    every live one has read it."""
    try:
      self.client.key_value_set(f'wsabie/failed/{self.me}', message, allow_overwrite=True)
      deadline = self.clock() + self.timeout
      while self.clock() < deadline:
        seen = dict(self.client.key_value_dir_get('wsabie/seen/'))
        if len(seen) >= self.count - 1:
          return
        time.sleep(self.interval / 4)
    except Exception:  # noqa: BLE001 (the service went down: nobody left to tell)
      return

  def _watch(self):
    while not self._stop.wait(self.interval):
      try:
        self.beat()
      except Exception:  # noqa: BLE001 (verdict times an unreachable service)
        pass
      reason = self.verdict()
      if reason is not None and not self._stop.is_set():
        print(f'error: {reason}', file=sys.stderr, flush=True)
        self._exit(1)
        return


def _one_line(error: BaseException) -> str:
  if isinstance(error, SystemExit):
    return str(error.code) if not isinstance(error.code, int) else f'exit status {error.code}'
  text = str(error).strip().splitlines()
  return f'{type(error).__name__}: {text[0] if text else ""}'.rstrip(': ')[:500]


def _status(error: BaseException) -> int:
  if isinstance(error, SystemExit) and isinstance(error.code, int):
    return error.code or 0
  return 1

"""Ctrl-C, SIGTERM and SIGHUP during training: finish the step, save, stop.

Python's default turns SIGINT into a KeyboardInterrupt wherever the loop
happens to be (a 50-line traceback, up to a checkpoint interval of work lost)
and SIGTERM (a scheduler's preemption notice) and SIGHUP (a closed terminal)
kill at once. While training, each only sets a flag; the loop reads it at its next step boundary, saves a
checkpoint and raises Interrupted, which launch/train.py prints as one line.
A second Ctrl-C while it saves interrupts at once, as a user pressing it
twice means.
"""
from __future__ import annotations

import contextlib
import signal
import threading

from wsabie_jax.core import signal_notes

NAMES = {signal.SIGINT: 'Ctrl-C (SIGINT)', signal.SIGTERM: 'SIGTERM',
         signal.SIGHUP: 'SIGHUP (hang-up: a closed terminal or a scheduler)'}


class Interrupted(RuntimeError):
  """Training stopped on a signal after saving; `status` is the exit status
  a shell expects of it (128 + the signal's number)."""

  def __init__(self, message: str, signum: int):
    super().__init__(message)
    self.status = 128 + signum

  def __reduce__(self):
    return type(self), (str(self), self.status - 128)


class Requests:
  """The signal received while `caught()` is active, if any (its number)."""

  def __init__(self):
    self.signum: int | None = None

  def handle(self, signum, frame):
    del frame
    if self.signum == signal.SIGINT and signum == signal.SIGINT:
      raise KeyboardInterrupt  # pressed twice: now
    self.signum = signum


@contextlib.contextmanager
def caught():
  """Yields Requests that SIGINT/SIGTERM set instead of stopping the process;
  the previous handlers are put back after. Off the main thread (where
  Python lets no handler be set) nothing is caught."""
  requests = Requests()
  if signal_notes.received:  # a signal before training whose KeyboardInterrupt was swallowed
    requests.signum = signal_notes.received[0]
  if threading.current_thread() is not threading.main_thread():
    yield requests
    return
  previous = {s: signal.signal(s, requests.handle) for s in NAMES}
  try:
    yield requests
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)

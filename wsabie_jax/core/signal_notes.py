"""Signals a launch command notes once its flags take over (cli.main), for
the training loop to read (interrupts.caught). Importing this installs
nothing: the library leaves Python's handlers alone, so a notebook's
interrupt stays a KeyboardInterrupt in its cell (core/startup.py, imported
by the launch scripts alone, is the one module that installs at import).

`remembered` handlers raise KeyboardInterrupt as Python's default does and
also note the signal, so that one swallowed where Python ignores exceptions
(a garbage-collection callback) still stops the run when training begins.
"""
from __future__ import annotations

import signal

from wsabie_jax.core import echoes

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
received: list[int] = []  # signals since `remembered`, oldest first


def remembered() -> None:
  """From here on a signal raises KeyboardInterrupt and is noted (cli.main);
  one swallowed where Python ignores exceptions prints nothing there."""
  for s in SIGNALS:
    signal.signal(s, _remember)
  echoes.quiet(_swallowed_signal)


def _remember(signum, frame):
  del frame
  received.append(signum)
  raise KeyboardInterrupt


def _swallowed_signal(unraisable) -> bool:
  """A noted signal's KeyboardInterrupt raised in a callback Python ignores
  exceptions of (JAX's gc callback): 'Exception ignored in …' and a 6-line
  traceback, for a signal that still stops the run (interrupts.caught)."""
  return issubclass(unraisable.exc_type, KeyboardInterrupt) and bool(received)

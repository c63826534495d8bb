"""Signals while a command starts: imported first by the launch scripts.

Importing jax and TensorFlow takes seconds; a Ctrl-C, SIGTERM or SIGHUP then
used to print a traceback from inside an import (6–37 lines). Until
`cli.main` takes over, such a signal ends the command at once with one line:
nothing has been read or written yet. After that `remembered` handlers raise
KeyboardInterrupt as Python's default does, and also note the signal, so that
one swallowed where Python ignores exceptions (a garbage-collection callback)
still stops the run when training begins (interrupts.caught).
"""
from __future__ import annotations

import os
import signal
import sys

from wsabie_jax.core import echoes

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
received: list[int] = []  # signals since `remembered`, oldest first


def _exit_now(signum, frame):
  del frame
  os.write(2, f'error: {signal.Signals(signum).name} while starting; nothing was written\n'
           .encode())
  os._exit(128 + signum)


def _remember(signum, frame):
  del frame
  received.append(signum)
  raise KeyboardInterrupt


def remembered() -> None:
  """From here on a signal raises KeyboardInterrupt and is noted (cli.main);
  one swallowed where Python ignores exceptions prints nothing there."""
  for s in SIGNALS:
    signal.signal(s, _remember)
  echoes.quiet(_swallowed_signal)


def _swallowed_signal(unraisable) -> bool:
  """A noted signal's KeyboardInterrupt raised in a callback Python ignores
  exceptions of (JAX's gc callback): 'Exception ignored in …' and a 6-line
  traceback, for a signal that still stops the run (interrupts.caught)."""
  return issubclass(unraisable.exc_type, KeyboardInterrupt) and bool(received)


if sys.platform != 'win32':
  for _s in SIGNALS:
    signal.signal(_s, _exit_now)

"""Signals while a launch command starts: imported first by the launch
scripts, and by nothing in the library (its import installs handlers).

Importing jax and TensorFlow takes seconds; a Ctrl-C, SIGTERM or SIGHUP then
would print a traceback from inside an import (6–37 lines). Until
`cli.main` takes over (core/signal_notes.py), such a signal ends the command
at once with one line: nothing has been read or written yet.
"""
from __future__ import annotations

import os
import signal
import sys

from wsabie_jax.core.signal_notes import SIGNALS


def _exit_now(signum, frame):
  del frame
  os.write(2, f'error: {signal.Signals(signum).name} while starting; nothing was written\n'
           .encode())
  os._exit(128 + signum)


if sys.platform != 'win32':
  for _s in SIGNALS:
    signal.signal(_s, _exit_now)

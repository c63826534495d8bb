"""Unraisable exceptions that only echo what was already said, kept quiet.

Python prints an exception it cannot raise ('Exception ignored in …' and a
traceback, through sys.unraisablehook): a signal's KeyboardInterrupt raised
inside JAX's gc callback (core/signal_notes.py notes the signal), Orbax's reads
and writes abandoned after a failure it reported (training/checkpoints.py).
Each names its echoes with a predicate here; one hook silences what any of
them matches and hands every other to the hook it found.
"""
from __future__ import annotations

import sys
from typing import Callable

_ECHOES: list[Callable[[object], bool]] = []  # predicates over sys.UnraisableHookArgs
_HOOKS: dict = {}  # 'before': the hook `quiet` found


def quiet(is_echo: Callable[[object], bool]) -> None:
  """From here on, an unraisable exception `is_echo` matches prints nothing."""
  if is_echo not in _ECHOES:
    _ECHOES.append(is_echo)
  if sys.unraisablehook is not _hook:
    _HOOKS['before'] = sys.unraisablehook
    sys.unraisablehook = _hook


def _hook(unraisable) -> None:
  if not any(is_echo(unraisable) for is_echo in _ECHOES):
    _HOOKS['before'](unraisable)

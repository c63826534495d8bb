"""An on/off switch for a form an A/B compares (the profile's, tests'): on,
except for the ops traced inside `turned_off()`."""
from __future__ import annotations

import contextlib


class Switch:
  def __init__(self):
    self.off = False

  @contextlib.contextmanager
  def turned_off(self):
    """The other form for the ops traced inside (the profile's A/B, tests)."""
    saved, self.off = self.off, True
    try:
      yield
    finally:
      self.off = saved

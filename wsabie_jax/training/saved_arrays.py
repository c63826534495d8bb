"""The .npz files a run keeps beside its checkpoints (the ensemble member's,
the neighbours' index): written whole or not at all, read only when every
member passes its zip checksum."""
from __future__ import annotations

import os
import pathlib
import zipfile

import numpy as np


def write(path, **arrays) -> None:
  """An .npz at `path`, written whole or not at all (a rename)."""
  path = pathlib.Path(path)
  part = path.with_suffix('.part.npz')
  np.savez(part, **arrays)
  os.replace(part, path)


def read(path, what: str, remedy: str, parse):
  """parse(the arrays) of the .npz at `path` (None where there is none), every
  member's zip checksum checked first, not only the bytes read: a damaged or
  unreadable file is a ValueError naming it, `what` it holds and `remedy`."""
  path = pathlib.Path(path)
  if not path.exists():
    return None
  try:
    with zipfile.ZipFile(path) as archive:
      damaged = archive.testzip()
    if damaged:
      raise ValueError(f'{damaged} fails its checksum')
    with np.load(path) as got:
      return parse(got)
  except Exception as error:  # (zipfile.BadZipFile, ValueError, KeyError, OSError)
    raise ValueError(f'{path}: {what} cannot be read ({error}); {remedy}') from None

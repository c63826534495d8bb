"""Where the project keeps what it builds once per machine: XLA's compiled
programs (api/cli.py), the native row kernel (core/native_rows.py), the
benchmark stand-ins (benchmarks/standins.py)."""
from __future__ import annotations

import os
import pathlib


def root() -> pathlib.Path:
  """$WSABIE_JAX_CACHE, else $XDG_CACHE_HOME/wsabie_jax (default ~/.cache/wsabie_jax)."""
  if os.environ.get('WSABIE_JAX_CACHE'):
    return pathlib.Path(os.environ['WSABIE_JAX_CACHE'])
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return pathlib.Path(base) / 'wsabie_jax'

"""What every launch script shares: config overrides checked before absl
parses them, and errors about the user's input or workdir as one line.

A misspelt `--config.train.bogus=1` used to end in a 53-line ml_collections
traceback; a bad value, a busy workdir or a diverged run in another. Here each
is one line naming what and where (exit status 1); a bug still gets its
traceback.
"""
from __future__ import annotations

import contextlib
import os
import sys

from absl import app, flags

from wsabie_jax import config as config_lib
from wsabie_jax.config.validate import ConfigError
from wsabie_jax.core.metrics import NonFiniteScores
from wsabie_jax.data import DataError
from wsabie_jax.training.checkpoints import CheckpointError
from wsabie_jax.training.loop import Diverged
from wsabie_jax.training.workdir import WorkdirError

_CACHE = flags.DEFINE_bool(
    'compilation_cache', True, "Keep XLA's compiled programs on disk ($WSABIE_JAX_CACHE, else "
    '~/.cache/wsabie_jax/jax): a command run again starts without compiling. '
    '--nocompilation_cache turns it off.')


def cache_dir() -> str:
  """Where compiled programs are kept ($WSABIE_JAX_CACHE, else under the user's cache)."""
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.environ.get('WSABIE_JAX_CACHE') or os.path.join(base, 'wsabie_jax', 'jax')


def use_compilation_cache() -> None:
  """JAX's persistent compilation cache in `cache_dir()`, unless --nocompilation_cache
  or the user set JAX_COMPILATION_CACHE_DIR (JAX reads that itself). Programs
  that compile in over 0.1 s are kept (JAX's default keeps those over 1 s:
  most of a command's start-up is many smaller ones)."""
  if not _CACHE.value or os.environ.get('JAX_COMPILATION_CACHE_DIR'):
    return
  import jax
  jax.config.update('jax_compilation_cache_dir', cache_dir())
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.1)


USER_ERRORS = (ConfigError, DataError, WorkdirError, CheckpointError, Diverged, NonFiniteScores)


def parse_flags(argv: list[str]) -> list[str]:
  """app.run's flags_parser: absl's, after every --config.PATH override is
  checked against the config file's fields (unknown ones: one line, the
  section's valid fields listed)."""
  spec = next((a.split('=', 1)[1] for a in argv if a.startswith('--config=')), None)
  overrides = [a[len('--config.'):].split('=', 1)[0] for a in argv if a.startswith('--config.')]
  if spec and overrides:
    try:
      config = config_lib.load(spec)
    except (ValueError, TypeError) as error:
      sys.exit(f'error: --config={spec}: {error}')
    for path in overrides:
      node, where = config, 'config'
      for key in path.split('.'):
        if not hasattr(node, 'keys') or key not in node:
          valid = sorted(node.keys()) if hasattr(node, 'keys') else []
          sys.exit(f'error: --config.{path}: {where} has no field {key!r}; valid: '
                   f'{", ".join(valid)}')
        node, where = node[key], f'{where}.{key}'
  return app.parse_flags_with_usage(argv)


@contextlib.contextmanager
def one_line_errors():
  """Exits with `error: MESSAGE` (status 1) on the user's errors (USER_ERRORS)."""
  try:
    yield
  except USER_ERRORS as error:
    sys.exit(f'error: {error}')

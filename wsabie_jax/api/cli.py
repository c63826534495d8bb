"""What every launch script shares: `cli.main(main)` in place of absl's
app.run, which answers a user's error in one line, and the config flag.

Left to absl and ml_collections, a misspelt `--config.train.bogus=1` ends in
a 53-line traceback; a data error met while a config file loads, in absl's
"Flags parsing error" without its file or line; a bad value, a busy workdir,
a missing file or a full disk in others. Here each is one line,
`error: WHAT: WHY; what to do`, and exit status 1 (130 for Ctrl-C); a bug
still gets its traceback.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import textwrap
import threading
from typing import Callable

from absl import app, flags
import ml_collections
from ml_collections import config_flags

from wsabie_jax import config as config_lib
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.core import signal_notes
from wsabie_jax.core import user_cache
from wsabie_jax.core.metrics import NonFiniteScores
from wsabie_jax.data import DataError
from wsabie_jax.data.wordnet import WordNetMissing
from wsabie_jax.training.checkpoints import CheckpointError
from wsabie_jax.training.hosts import Disagree
from wsabie_jax.training.interrupts import Interrupted
from wsabie_jax.training.loop import Diverged
from wsabie_jax.training.workdir import WorkdirError

_CACHE = flags.DEFINE_bool(
    'compilation_cache', True, "Keep XLA's compiled programs on disk ($WSABIE_JAX_CACHE, else "
    '~/.cache/wsabie_jax/jax): a command run again starts without compiling. '
    '--nocompilation_cache turns it off.')


def cache_dir() -> str:
  """Where compiled programs are kept ($WSABIE_JAX_CACHE, else under the user's cache)."""
  root = user_cache.root()
  return str(root if os.environ.get('WSABIE_JAX_CACHE') else root / 'jax')


def use_compilation_cache() -> None:
  """JAX's persistent compilation cache in `cache_dir()`, unless --nocompilation_cache
  or the user set JAX_COMPILATION_CACHE_DIR (JAX reads that itself). Every
  program is kept, however quick to compile (JAX's default keeps those over
  1 s): most of a run's start is some twenty small ones (evaluation at each
  split's shape, finiteness checks, the members' averaging), each 30–60 ms
  to compile on 2 CPU cores and less to read back; a run started again with
  the same shapes compiles none (tests/compiles_test.py)."""
  if not _CACHE.value or os.environ.get('JAX_COMPILATION_CACHE_DIR'):
    return
  import jax
  jax.config.update('jax_compilation_cache_dir', cache_dir())
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)


USER_ERRORS = (ConfigError, DataError, WorkdirError, CheckpointError, Diverged, NonFiniteScores,
               WordNetMissing, Disagree)

# OSErrors about the user's files and disks (a bug's OSError keeps its traceback).
_FILE_ERRNOS = {errno.ENOENT: 'check the path', errno.EACCES: 'check its permissions',
                errno.EPERM: 'check its permissions', errno.EROFS: 'the file system is read-only',
                errno.ENOSPC: 'free some space (a training run resumes from its last checkpoint)',
                errno.EDQUOT: 'over the disk quota', errno.EISDIR: 'a folder, not a file',
                errno.ENOTDIR: 'a file, not a folder', errno.ENAMETOOLONG: 'shorten it',
                errno.EEXIST: 'a file is in the way'}


def main(fn: Callable[[list[str]], object]) -> None:
  """app.run(fn) with one-line errors: flags (unknown, bad values), the
  config file (its loading, its overrides), and what `fn` raises of
  USER_ERRORS, file-system errors and Ctrl-C."""
  def guarded(argv):
    with one_line_errors():
      return fn(argv)
  signal_notes.remembered()
  with one_line_errors():  # (a signal while the flags and the config load)
    app.run(guarded, flags_parser=parse_flags)


def error_line(error: BaseException) -> str | None:
  """The one line for a user's error; None for anything else (a bug)."""
  if isinstance(error, USER_ERRORS):
    return str(error)
  if isinstance(error, OSError) and error.errno in _FILE_ERRNOS:
    what = f'{error.filename}: ' if error.filename else ''
    return f'{what}{error.strerror or error}; {_FILE_ERRNOS[error.errno]}'
  if isinstance(error, app.UsageError):
    return f'{error}; see --helpshort'
  return None


@contextlib.contextmanager
def one_line_errors():
  """Exits with `error: MESSAGE` (status 1) on a user's error (`error_line`),
  `interrupted` (130) on Ctrl-C, silently (141) when its output's reader
  has gone (a pipe into `head`)."""
  try:
    yield
  except Interrupted as stopped:  # saved: not an error, but the command did not finish
    print(stopped, file=sys.stderr)
    sys.exit(stopped.status)
  except KeyboardInterrupt:
    signum = signal_notes.received[-1] if signal_notes.received else signal.SIGINT
    print(f'error: interrupted ({signal.Signals(signum).name})', file=sys.stderr)
    _cancel_timers()
    sys.exit(128 + signum)
  except BrokenPipeError:  # `… | head`: the reader has what it wanted; quiet, as Unix tools are
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (the exit's flush)
    sys.exit(128 + signal.SIGPIPE)
  except Exception as error:  # noqa: BLE001 (re-raised unless it is the user's)
    line = error_line(error)
    if line is None:
      raise
    sys.exit(f'error: {line}')


def _cancel_timers() -> None:
  """Cancels every threading.Timer still waiting. A signal that lands inside a
  library's start-up can leave one running: JAX starts its 60-s "TPU backend
  initialization is taking more than 60 seconds" warning just before the try
  that cancels it, so a Ctrl-C there held the exit for 60 s and printed the
  warning after the one line (a timer thread is not a daemon)."""
  for thread in threading.enumerate():
    if isinstance(thread, threading.Timer):
      thread.cancel()


# --- the config flag: loaded once, its errors in one line --------------------

_LOADED: dict[str, object] = {}


def load_config(spec: str):
  """The config `--config=FILE.py[:ARG]` names, loaded once a process (a data
  set read by get_config is read once); a user's error in it exits with one line."""
  if spec not in _LOADED:
    try:
      _LOADED[spec] = config_lib.load(spec)
    except SyntaxError as error:
      sys.exit(f'error: --config={spec}: {error.filename}, line {error.lineno}: syntax error '
               f'({error.msg})')
    except AttributeError as error:
      sys.exit(f'error: --config={spec}: {error}; a config file defines get_config(arg=None)')
    except (ValueError, TypeError, KeyError, OSError, ImportError) as error:
      line = error_line(error) or str(error)
      sys.exit(f'error: --config={spec}: {line.splitlines()[0] if line else type(error).__name__}')
  return _LOADED[spec]


class _ConfigParser(flags.ArgumentParser):
  """The config flag's parser: `load_config`'s (locked) config."""

  def parse(self, argument):
    config = load_config(argument)
    if isinstance(config, ml_collections.ConfigDict):
      config.lock()
    return config

  def flag_type(self):
    return 'config object'


def define_config(help_string: str) -> flags.FlagHolder:
  """--config=FILE.py[:ARG] with --config.PATH=VALUE overrides (ml_collections'
  config_flags), loading through `load_config`."""
  try:  # (it reads sys.argv's --flagfile=... now, at import)
    holder = config_flags.DEFINE_config_file('config', None, help_string, lock_config=True)
  except flags.Error as error:
    sys.exit(f'error: {_flag_error(error)}')
  flags.FLAGS['config'].parser = _ConfigParser()
  return holder


def say(message: str) -> None:
  """A line on stderr at once: what a command is doing before its first result
  (reading a run, compiling) — seconds on a busy machine that were silent."""
  print(message, file=sys.stderr, flush=True)


HELP_FLAGS = ('--help', '-h', '-?', '--helpshort')


def help_text() -> str:
  """The command's docstring and its own flags, --config included (absl's
  --help leaves out flags defined by a library's module, and exits 1)."""
  main = sys.modules['__main__']
  lines = [(main.__doc__ or '').strip(), '', 'flags:']
  if 'config' in flags.FLAGS:
    lines += textwrap.wrap(
        f'--config: {flags.FLAGS["config"].help} FILE.py[:ARG] (configs/); any field can be '
        'set with --config.SECTION.FIELD=VALUE', 80, initial_indent='  ',
        subsequent_indent='    ')
  lines += [line for line in flags.FLAGS.main_module_help().splitlines()
            if line.startswith(' ')]  # (not the module's name above them)
  return '\n'.join(lines + ['', "Every flag, the libraries' too: --helpfull"])


def parse_flags(argv: list[str]) -> list[str]:
  """app.run's flags_parser: absl's, with a bad flag in one line, the config
  file loaded first (`load_config`) and every --config.PATH override checked
  against its fields (unknown ones: the section's valid fields listed)."""
  ours = argv[:argv.index('--')] if '--' in argv else argv  # (the rest is another program's)
  if any(a in HELP_FLAGS for a in ours[1:]):
    print(help_text())
    sys.exit(0)
  spec = next((a.split('=', 1)[1] for a in ours if a.startswith('--config=')), None)
  overrides = [a[len('--config.'):].split('=', 1)[0] for a in ours if a.startswith('--config.')]
  if spec and 'config' in flags.FLAGS:
    config = load_config(spec)
    for path in overrides:
      node, where = config, 'config'
      for key in path.split('.'):
        if not isinstance(node, ml_collections.ConfigDict) or key not in node:
          valid = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
          sys.exit(f'error: --config.{path}: {where} has no field {key!r}; valid: '
                   f'{", ".join(valid)}')
        node, where = node[key], f'{where}.{key}'
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    sys.exit(f'error: {_flag_error(error)}')


def _flag_error(error: Exception) -> str:
  return f'{str(error).splitlines()[0].removeprefix("ERROR:: ")}; see --helpshort'

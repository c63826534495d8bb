"""Importing the library, as a notebook or a user's script does, leaves
Python's signal handlers as they were: only the launch scripts install
theirs (core/startup.py). Were one installed on import, interrupting a
Colab cell would end the kernel and everything it held. And a launch
script's start imports no scipy (docs/DESIGN.md §7: each process's start)."""
import pathlib
import subprocess
import sys

SCRIPT = '''
import importlib, pkgutil, signal, sys
# Python's own handlers set first: a process started as a background job (`cmd &`)
# inherits SIGINT ignored, and Python then leaves it so.
signal.signal(signal.SIGINT, signal.default_int_handler)
for s in (signal.SIGTERM, signal.SIGHUP):
  signal.signal(s, signal.SIG_DFL)
import wsabie_jax
for m in pkgutil.walk_packages(wsabie_jax.__path__, 'wsabie_jax.'):
  if m.name != 'wsabie_jax.core.startup':  # (the launch scripts' own: it installs)
    importlib.import_module(m.name)
assert 'wsabie_jax.core.startup' not in sys.modules
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      [signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGHUP)])
try:  # (raised in this thread, so the handler runs on return: os.kill may land on one of
  signal.raise_signal(signal.SIGINT)  # XLA's threads and be seen only after the try)
  print('ignored')
except KeyboardInterrupt:
  print('KeyboardInterrupt')
'''


def test_importing_every_module_installs_no_signal_handler():
  got = subprocess.run([sys.executable, '-c', SCRIPT], capture_output=True, text=True, timeout=120)
  assert got.returncode == 0, got.stderr[-2000:]
  handlers, caught = got.stdout.splitlines()[-2:]
  assert handlers == 'True [True, True]', got.stdout  # (SIGINT, then SIGTERM and SIGHUP)
  assert caught == 'KeyboardInterrupt', got.stdout


def test_a_launch_script_starts_without_scipy():
  """train.py's imports (every method, the members, the checkpoints) leave
  scipy out, 0.2 s of each launch's start: the kernel member's float64 factor
  is numpy's, ridge's sparse matrix is imported when that member trains."""
  root = pathlib.Path(__file__).resolve().parents[1]
  got = subprocess.run([sys.executable, '-X', 'importtime', 'launch/train.py', '--helpshort'],
                       cwd=root, capture_output=True, text=True, timeout=120)
  assert got.returncode == 0, got.stderr[-2000:]
  imported = [line.rsplit('|', 1)[-1].strip() for line in got.stderr.splitlines()
              if line.startswith('import time:')]
  assert 'jax' in imported and 'wsabie_jax.baselines.kernel' in imported
  assert [m for m in imported if m.split('.')[0] == 'scipy'] == []

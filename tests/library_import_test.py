"""Importing the library, as a notebook or a user's script does, leaves
Python's signal handlers as they were: only the launch scripts install
theirs (core/startup.py). Were one installed on import, interrupting a
Colab cell would end the kernel and everything it held."""
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

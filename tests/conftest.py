import os
import pathlib
import tempfile

# XLA's older CPU fusion emitters, quicker to compile (_fast_compile_flags).
OLDER_EMITTERS = '--xla_cpu_use_fusion_emitters=false'


def _fast_compile_flags() -> str:
  """XLA flags that make compiling cheaper, for tests whose time is compiling.

  XLA's older CPU fusion emitters: with optimisations off they compile a step
  in about half the time (tests/step_test.py's slow-reference cases on one
  core and an empty compile cache: 29.8 s of compiling with the newer emitters,
  15.0 s with these; the fast tier on 2 cores, 4 min 15 s and 3 min 9 s). A
  jaxlib that lacks the flag would stop at it (XLA refuses an unknown flag):
  only from the jaxlib it was measured on. A test that pins two programs
  bit-identical compiles as users do (helpers.users_codegen).

  LLVM at its level 1 where a test turns optimisations back on
  (helpers.optimized: XLA's own passes all run, LLVM's do less): tables 003-2
  and 004-1 (tests/reproduce_test.py) took 40 s on an empty cache at the
  users' level 3 and 27 s at level 1, 13 s and 12 s on a kept one.
  """
  from importlib import metadata
  flags = ['--xla_backend_optimization_level=1']
  try:
    version = tuple(int(v) for v in metadata.version('jaxlib').split('.')[:2])
  except (metadata.PackageNotFoundError, ValueError):
    version = (0, 0)
  if version >= (0, 10):
    flags.append(OLDER_EMITTERS)
  return ' '.join(flags)


# Tests see 4 CPU devices (data-parallel tests name them: jax.devices('cpu'));
# tests that launch a one-device run drop the count (helpers.one_device_env).
os.environ.setdefault('XLA_FLAGS',
                      f'--xla_force_host_platform_device_count=4 {_fast_compile_flags()}'.strip())
# On a GPU, pytest -n N starts N processes on one device: each takes memory as
# it needs it instead of JAX's default 75% of the device at start.
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
# Launch scripts keep compiled programs (api/cli.py): the tests' go to
# a folder of their own, shared by the workers and by later runs on this machine.
os.environ.setdefault('WSABIE_JAX_CACHE', os.path.join(tempfile.gettempdir(),
                                                       f'wsabie_jax_test_cache_{os.getuid()}'))
# The processes tests launch keep every program there too, however quick to
# compile, as the launch scripts do (JAX reads these two itself, so the
# notebooks' and the clusters' processes keep them as well): most of a short
# run's compiles are small programs, the same in every launched run of a config.
os.environ.setdefault('JAX_COMPILATION_CACHE_DIR', os.environ['WSABIE_JAX_CACHE'])
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')

# Config files by name (api/configs.py) from this checkout's configs/, whatever
# folder a test works in.
os.environ.setdefault('WSABIE_JAX_CONFIGS', str(pathlib.Path(__file__).resolve().parents[1] /
                                                'configs'))

# Most of a test's time is XLA compiling small programs, once each (1,308
# compiles, 0.04 s on average, were 70% of five step files' 75 s); the tests
# check values, not speed: compiled with few optimisations they take 20% less.
# Set before jax is imported, so the launched subprocesses (launch_test,
# multihost_test, cli_test, colabs_test) read it too. A test whose time is
# its steps turns them back on: helpers.optimized in process,
# helpers.OPTIMIZED_ENV for what it launches.
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', '1')

# In-process tests keep compiled programs in the same folder: many tests
# compile the same steps at the same shapes, in either worker (JAX keys its
# cache by program and flags). Every program is kept, however quick to compile:
# the fast tier compiles some 3,300, most of them single ops run eagerly, and
# reading one back is cheaper than compiling it (the fast tier on 2 cores,
# the second run on this folder: 2 min 54 s kept at any compile time, 3 min
# 49 s kept from 0.1 s; a first run 5 min 45 s either way).
import jax  # noqa: E402 (after XLA_FLAGS: the device count is read at import)

jax.config.update('jax_compilation_cache_dir', os.environ['WSABIE_JAX_CACHE'])
jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)

import pytest  # noqa: E402


@pytest.fixture
def float32_matmuls():
  """helpers.float32_matmuls around a test (`pytest.mark.usefixtures`)."""
  from tests import helpers
  with helpers.float32_matmuls():
    yield


@pytest.fixture
def users_codegen():
  """helpers.users_codegen around a test (`pytest.mark.usefixtures`)."""
  from tests import helpers
  with helpers.users_codegen():
    yield


# A module fixture is made once a run, not once a worker (tests/grouping.py).
from tests.grouping import pytest_itemcollected  # noqa: E402,F401 (a hook: pytest finds it here)

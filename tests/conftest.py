import os
import tempfile

# Tests see 4 CPU devices (data-parallel tests name them: jax.devices('cpu')).
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')
# On a GPU, pytest -n N starts N processes on one device: each takes memory as
# it needs it instead of JAX's default 75% of the device at start.
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
# Launch scripts keep compiled programs (experiments/cli.py): the tests' go to
# a folder of their own, shared by the workers and by later runs on this machine.
os.environ.setdefault('WSABIE_JAX_CACHE', os.path.join(tempfile.gettempdir(),
                                                       f'wsabie_jax_test_cache_{os.getuid()}'))

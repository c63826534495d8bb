import os

# Tests see 4 CPU devices (data-parallel tests name them: jax.devices('cpu')).
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')
# On a GPU, pytest -n N starts N processes on one device: each takes memory as
# it needs it instead of JAX's default 75% of the device at start.
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')

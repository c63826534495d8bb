import os

# Tests see 4 CPU devices (data-parallel tests) and import from the checkout.
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')

"""The tests' own XLA settings (tests/conftest.py): launched one-device runs
keep them, and the bit-identical tests compile as a user's run does."""
import os

from tests import helpers


def test_a_launched_one_device_run_keeps_every_flag_but_the_device_count(monkeypatch):
  monkeypatch.setenv('XLA_FLAGS', '--xla_force_host_platform_device_count=4 --xla_a=1 --xla_b=0')
  env = helpers.one_device_env(X='y')
  assert env['XLA_FLAGS'] == '--xla_a=1 --xla_b=0' and env['X'] == 'y'
  assert os.environ['XLA_FLAGS'].startswith('--xla_force_host_platform_device_count=4')


def test_users_codegen_compiles_with_the_users_fusion_emitters():
  from jax._src import compiler
  with helpers.users_codegen():
    inside = dict(compiler.get_compile_options(1, 1).env_option_overrides)
  outside = dict(compiler.get_compile_options(1, 1).env_option_overrides)
  assert 'xla_cpu_use_fusion_emitters' not in outside
  from tests.conftest import OLDER_EMITTERS
  if OLDER_EMITTERS in os.environ['XLA_FLAGS'].split():
    assert inside['xla_cpu_use_fusion_emitters'] is True
  else:  # (a jaxlib without the flag: the tests compile as users' runs anyway)
    assert inside == outside

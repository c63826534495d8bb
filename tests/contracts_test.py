"""The explicit contracts: every registered method module is a MethodModule
(methods/__init__.py), every training stream a Stream, resident or streamed
(training/method.py), with the signatures the loop and the launch scripts call."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax import methods
from wsabie_jax.api import configs
from wsabie_jax.data import batching, shards, synthetic
from wsabie_jax.parts import proxy
from wsabie_jax.training import method as method_lib, parallel


def _protocol_functions(protocol) -> dict:
  return {name: inspect.signature(fn) for name, fn in vars(protocol).items()
          if inspect.isfunction(fn) and not name.startswith('_')}


@pytest.mark.parametrize('name', sorted(methods.REGISTRY))
def test_every_method_module_is_a_method_module(name):
  module = methods.get(name)
  for fn_name, wanted in _protocol_functions(methods.MethodModule).items():
    assert callable(getattr(module, fn_name, None)), f'{name} lacks {fn_name}'
    params = list(wanted.parameters)[1:]  # (less self)
    got = list(inspect.signature(getattr(module, fn_name)).parameters)
    assert got == params, f'{name}.{fn_name}{got} is not {params}'


def _streams(tmp_path) -> list:
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=20, num_features=50, nnz=5), 60)
  shards.write_shard_set(tmp_path, [ds], ds.label_names)
  rel = np.array([[0, 1], [2, 3]])
  return [batching.PairStream(ds, 8, 0), batching.PairStream(ds, 8, 0, positives_per_row=3),
          batching.ImageStream(ds, batching.pad_images(ds), 8, 0),
          proxy.QuadrupletStream(ds, rel, 8, 0),
          shards.ShardedPairStream(shards.ShardSet(tmp_path), 8, 0)]


def test_every_stream_keeps_the_stream_contract(tmp_path):
  for stream in _streams(tmp_path):
    kind = type(stream).__name__
    assert isinstance(stream, method_lib.Stream), kind
    assert stream.num_examples > 0 and stream.pairs_per_row >= 1.0, kind
    assert jax.tree.leaves(stream.batch(0)) and 'epoch' in stream.position(3), kind
    if not stream.resident:
      assert not isinstance(stream, method_lib.ResidentStream) or not stream.resident
      continue
    assert isinstance(stream, method_lib.ResidentStream), kind
    ids = np.asarray(stream.ids_block(2, 3))
    assert ids.shape[0] == 3, kind
    budget = stream.budget(ids)
    assert (budget is None) == (not stream.plans), kind
    for name in method_lib.PLANNING if stream.plans else ():
      assert hasattr(stream, name), f'{kind} plans but lacks {name}'
    # The device's batch equals the host's: the same step, both ways.
    gather = functools.partial(stream.gather, budget=budget) if budget is not None else stream.gather
    on_device = gather(jax.tree.map(jnp.asarray, stream.table()), jnp.asarray(ids[0]))
    on_host = stream.batch(2)
    assert jax.tree.structure(on_device) == jax.tree.structure(on_host), kind
    for a, b in zip(jax.tree.leaves(on_device), jax.tree.leaves(on_host)):
      np.testing.assert_array_equal(np.asarray(a), b, err_msg=kind)


@pytest.mark.parametrize('spec,overrides', [
    ('wsabie_synthetic:small', {'optim.kind': 'sgd', 'model.max_norm': 1e6}),
    ('wsabie_synthetic:small', {'model.max_norm': 1e6}),
    ('skipgram_synthetic:proposed,small', {}),
    ('parts_synthetic:shared,iw,small', {'model.max_norm': 1e6})])
def test_every_method_steps_at_a_lowered_rate_move_that_much_less(spec, overrides):
  """The state's `rate_scale` (train.plateau_drops): from one state and batch,
  every value the step moves moves `scale` times as far at that scale (the
  rows' SGD and Adagrad steps, the tower's first Adam step); what does not
  scale (accumulators, moments, counters) is the same. Bounds loose enough
  that no projection cuts a step."""
  if spec.startswith('parts'):
    helpers.skip_without_wordnet()
  config = methods.check(configs.load(spec))
  for name, value in overrides.items():
    section, field = name.split('.')
    config[section][field] = value
  method = methods.of(config).build(config, parallel.make_mesh(1))
  state, batch = method.init_state(), method.stream.batch(0)
  step = jax.jit(method.pure_step)
  (full, _), (quarter, _) = (step(state._replace(rate_scale=jnp.float32(s)), batch)
                             for s in (1.0, 0.25))
  scaled = 0
  for before, a, b in zip(*(jax.tree.leaves(x._replace(rate_scale=None))
                            for x in (state, full, quarter))):
    before, a, b = (np.asarray(x, np.float64) for x in (before, a, b))
    # Unscaled: the two programs agree to round-off (a GPU's scatter-adds of
    # repeated rows sum in any order), where a scaled value differs by ¾ of its move.
    if np.abs(a - b).max() <= 1e-3 * np.abs(a - before).max() + 1e-7:
      continue
    np.testing.assert_allclose(b - before, 0.25 * (a - before), rtol=1e-3, atol=1e-6)
    scaled += 1
  assert scaled >= 2  # the image side and the label side

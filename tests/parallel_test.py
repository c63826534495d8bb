"""Data parallelism over 4 forced CPU devices (tests/conftest.py) equals one device.

The tests name the CPU devices, so they run alike where the default device
is a GPU (there the one-device reference runs on the first CPU device too)."""
import jax
import numpy as np
import pytest

from wsabie_jax.training import parallel
from tests import helpers
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.data import batching, synthetic


@pytest.mark.parametrize('loss,optimizer,sampler,tables', [
    ('warp', 'adagrad', 'uniform', 'by_size'), ('warp', 'adagrad', 'uniform', 'rows'),
    ('warp', 'sgd', 'uniform', 'whole'), ('auc', 'sgd', 'uniform', 'by_size'),
    ('warp', 'adagrad', 'adaptive', 'by_size'), ('auc', 'sgd', 'adaptive', 'rows'),
    ('exact', 'adagrad', 'uniform', 'by_size'), ('exact', 'sgd', 'uniform', 'rows'),
    ('warp', 'adagrad', 'shared', 'by_size')])
def test_four_devices_match_one(loss, optimizer, sampler, tables):
  """Gathered rows are all-gathered, tables read whole (wsabie/table_reads.py) summed;
  'by_size' reads the labels whole here for WARP (Y 60 ≤ 8·(K+Q), in the
  caches). Sampler 'shared': uniform draws shared by the batch's rows (every
  device draws the same K)."""
  cpus = jax.devices('cpu')
  assert len(cpus) >= 4, 'tests/conftest.py forces 4 CPU devices'
  with jax.default_device(cpus[0]):
    _four_devices_match_one(loss, optimizer, sampler, tables, cpus)


def _four_devices_match_one(loss, optimizer, sampler, tables, cpus):
  spec = synthetic.SyntheticSpec(num_labels=60, num_features=300, nnz=10)
  ds = synthetic.generate(spec, 400)
  stream = batching.PairStream(ds, batch_size=32, seed=0)
  stream4 = batching.PairStream(ds, batch_size=32, seed=0, packs=4)
  adaptive = dict(sampler='adaptive', violators='all', rank_estimate='violator_count',
                  rank_scale=0.05, refresh_every_pairs=64)  # a refresh every other step
  cfg = helpers.step_config(60, dim=8, loss=loss, num_draws=20, optimizer=optimizer,
                            learning_rate=0.2, tables=tables,
                            **{'adaptive': adaptive, 'shared': dict(draws='per_batch'),
                               'uniform': {}}[sampler])
  init = lambda: step_lib.init_state(jax.random.PRNGKey(0), 300, cfg)
  one, step1 = init(), step_lib.make_train_step(cfg)
  mesh = parallel.make_mesh(4, cpus)
  four, step4 = init(), step_lib.make_parallel_train_step(cfg, mesh)
  for s in range(6):
    one, stats1 = step1(one, jax.device_put(stream.batch(s)))
    four, stats4 = step4(four, parallel.shard_batch(stream4.batch(s), mesh))
    assert int(stats1['pairs']) == int(stats4['pairs']) == 32
  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(four)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
  assert float(stats1['loss']) == pytest.approx(float(stats4['loss']), rel=1e-5)


def test_more_devices_than_there_are_is_one_line_naming_the_field():
  """Not a 25-line ValueError traceback (num_devices=8 on one device, or a
  4-device run resumed on one)."""
  from wsabie_jax.config.schema import ConfigError
  with pytest.raises(ConfigError, match=r'config.train.num_devices=8: only 4 devices here '
                                        r'\(1 process\); 0 takes them all'):
    parallel.make_mesh(8, jax.devices('cpu')[:4])


def test_batch_must_split_evenly():
  mesh = parallel.make_mesh(4, jax.devices('cpu'))
  with pytest.raises(ValueError, match='not divisible by 4 devices'):
    parallel.shard_batch({'label_B': np.zeros(6, np.int32)}, mesh)


@pytest.mark.slow  # a whole training
@pytest.mark.parametrize('per_call,length', [(1, 'auto'), (4, 'auto'), (4, 'static')])
def test_training_loop_on_four_devices_matches_one(tmp_path, per_call, length):
  """One dispatch a step, or a lax.fori_loop of 4 inside shard_map (each device
  gathering its slice of every step's batch from the replicated table); with
  'static' (an accelerator's call_length) the full calls' loops have their
  length built in, the short ones before each validation not."""
  from tests.train_test import _tiny_config
  from wsabie_jax.api import run
  results = []
  for n in (1, 4):
    c = _tiny_config(max_steps=12, eval_every_steps=6)
    c.train.update(num_devices=n, platform='cpu', steps_per_call=per_call, call_length=length)
    results.append(run.train_and_evaluate(c, tmp_path / str(n)))
  for key in ('p@1', 'p@10', 'map', 'psib@10'):
    assert results[0][key] == pytest.approx(results[1][key], abs=1e-6), key


@pytest.mark.slow  # a whole training
@pytest.mark.parametrize('per_call', [1, 4])
def test_skipgram_on_four_devices_matches_one(tmp_path, per_call):
  """Paper 004's step, batch split over 4 devices (XLA partitions it, the scan
  of steps too), equals one device."""
  from wsabie_jax.api import configs
  from wsabie_jax.api import run
  results = []
  for n in (1, 4):
    c = configs.load('skipgram_synthetic:proposed,small')
    c.train.update(max_steps=10, eval_every_steps=5, num_devices=n, batch_size=32,
                   platform='cpu', steps_per_call=per_call)
    c.oov.steps = 0
    results.append(run.train_and_evaluate(c, tmp_path / str(n)))
  for key in ('p@1', 'p@5', 'map', 'class_f1@5'):
    assert results[0][key] == pytest.approx(results[1][key], abs=1e-4), key

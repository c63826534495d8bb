"""Reading a table whole by matmuls (wsabie/tables.py) is the gathered-rows update."""
import jax
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.core import model
from wsabie_jax.data import batching, synthetic
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.wsabie import tables

Y, d = 40, 120


def _cfg(**kw):
  return helpers.step_config(Y, **{**dict(dim=8, num_draws=10, learning_rate=0.2,
                                          optimizer='adagrad', max_norm=1.0), **kw})


def test_auto_reads_whole_only_where_cheaper_and_possible():
  small = _cfg(num_draws=10)  # Y 40 ≤ 8·11
  assert tables.choose(small, 64, 64 * 10, 300) == tables.Whole(True, False)  # 64·300 > 20·640
  assert tables.choose(small, 64, 64 * 10, 20).features  # 64·20 ≤ 20·640
  assert not tables.choose(helpers.step_config(1000, num_draws=10), 64, 640, d).labels
  assert tables.choose(_cfg(tables='whole'), 64, 1, 10**6) == tables.Whole(True, True)
  assert tables.choose(_cfg(tables='labels'), 64, 1, 10**6) == tables.Whole(True, False)
  assert tables.choose(_cfg(tables='features'), 64, 1, 10**6) == tables.Whole(False, True)
  for kw in (dict(tables='rows'), dict(score='neg_euclidean'), dict(l2=0.01), dict(loss='exact')):
    assert tables.choose(_cfg(**kw), 64, 640, 20) == tables.Whole(False, False), kw


OBJECTIVES = {
    'warp_first': dict(),
    'warp_all': dict(violators='all', rank_estimate='violator_count'),
    'auc_logistic': dict(loss='auc', pairwise='logistic', optimizer='sgd'),
    'adaptive': dict(sampler='adaptive', violators='all', rank_estimate='violator_count',
                     rank_scale=0.1, refresh_every_pairs=64),
}


@pytest.mark.parametrize('objective', sorted(OBJECTIVES))
@pytest.mark.parametrize('whole', ['labels', 'features'])
def test_each_table_read_whole_gives_the_gathered_update(objective, whole):
  """Five steps from the same state: parameters, Adagrad accumulators and stats
  agree with the gathered step to float rounding (the sums run in another order)."""
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=6), 300)
  stream = batching.PairStream(ds, 32, 0)
  runs = []
  for kind in ('rows', whole):
    cfg = _cfg(tables=kind, **OBJECTIVES[objective])
    state = step_lib.init_state(jax.random.PRNGKey(0), d, cfg)
    # Rows grown to the ball's edge, so that pairs violate and rows get projected.
    state = state._replace(params=_grown(state.params))
    step, stats = step_lib.make_train_step(cfg), []
    for s in range(5):
      state, st = step(state, jax.device_put(stream.batch(s)))
      stats.append(jax.tree.map(float, st))
    runs.append((state, stats))
  (rows, rows_stats), (other, other_stats) = runs
  for a, b in zip(jax.tree.leaves(rows), jax.tree.leaves(other)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-5, atol=2e-6)
  assert sum(s.get('violator_found', 0) for s in rows_stats) > 0  # not vacuous
  for a, b in zip(rows_stats, other_stats):
    assert a.keys() == b.keys()
    for k in a:
      assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), k
  start = _grown(step_lib.init_state(jax.random.PRNGKey(0), d, cfg).params)
  assert np.abs(np.asarray(other.params.W_YxD) - np.asarray(start.W_YxD)).max() > 1e-3


def _grown(params):
  return model.Params(*(model.project_rows(p * 6, 1.0) for p in params))

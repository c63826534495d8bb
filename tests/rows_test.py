"""Rows of Q pairs (data/batching.PairStream positives_per_row, batching.PairBatch):
an epoch still visits every pair once, and a row's step is its Q pairs' steps
with the row's K draws shared."""
import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.core import model, row_optim
from wsabie_jax.data import batching, packing, synthetic
from wsabie_jax.wsabie import adaptive_sampler
from wsabie_jax.wsabie import step as step_lib

# Two forms of the same arithmetic compared: float32 matmuls on any device.
pytestmark = pytest.mark.usefixtures('float32_matmuls')

Y, d, Q = 40, 120, 3


def _data():
  return synthetic.generate(synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=6,
                                                    mean_labels=3.0, max_labels=8), 300)


def _pairs(ds):
  img = np.repeat(np.arange(ds.num_images), np.diff(ds.label_indptr))
  return collections.Counter(zip(img.tolist(), ds.label_idx.tolist()))


def test_rows_hold_every_pair_once_and_split_long_images():
  ds = _data()
  n_pos = np.diff(ds.label_indptr)
  assert n_pos.max() > Q  # some images take several rows
  stream = batching.PairStream(ds, 16, 0, positives_per_row=Q)
  t = stream.table()
  got = collections.Counter((int(i), int(y)) for r, i in enumerate(t['row_image'])
                            for y in t['row_label'][r, :t['row_num'][r]])
  assert got == _pairs(ds)
  assert (np.bincount(t['row_image'], minlength=ds.num_images) == -(-n_pos // Q)).all()
  assert stream.num_examples == len(t['row_image']) and stream.num_pairs == len(ds.label_idx)
  b = stream.batch(3)
  assert b.label_BxQ.shape == b.weight_BxQ.shape == (16, Q)
  np.testing.assert_array_equal(b.weight_BxQ.sum(1), t['row_num'][stream.ids(3)])
  # Every label of a row is one of its image's positives (padding repeats one).
  assert all(set(b.label_BxQ[r]) <= set(b.pos_BxP[r]) for r in range(16))
  # Q = 1 is a pair a row, in the dataset's pair order.
  one = batching.PairStream(ds, 16, 0)
  np.testing.assert_array_equal(one.table()['row_label'][:, 0], ds.label_idx)
  pairs = one.batch(0)  # (a pair a row: Q = 1, every weight 1)
  assert pairs.label_BxQ.shape == (16, 1) and np.all(pairs.weight_BxQ == 1)
  assert pairs.feat_idx_BxF is None and pairs.feat_idx_SxN is not None  # packed


def _as_pairs(stream, step):
  """Batch `step` of a Q-row stream, and its real pairs one a row (padding
  dropped), with the row each came from."""
  t, ids = stream.table(), stream.ids(step)
  rows = stream.batch(step)
  real = rows.weight_BxQ.reshape(-1) > 0
  row_of = np.repeat(np.arange(len(ids)), Q)[real]
  img_P = t['row_image'][ids][row_of]
  budget = int(-(-t['feat_len'][img_P].sum() // 8) * 8)
  return rows, batching.PairBatch(
      **packing.pack(t, img_P, len(img_P), budget, np),
      label_BxQ=rows.label_BxQ.reshape(-1)[real][:, None],
      weight_BxQ=np.ones((len(img_P), 1), np.float32),
      pos_BxP=rows.pos_BxP[row_of], num_pos_B=rows.num_pos_B[row_of]), row_of


def _dense(grad, n):
  if isinstance(grad, row_optim.DenseGrad):
    return np.asarray(grad.grad_NxD)
  return np.asarray(jnp.zeros((n, grad.grads_RxD.shape[1])).at[grad.rows_R].add(grad.grads_RxD))


OBJECTIVES = {
    'warp_first': dict(),
    'warp_all': dict(violators='all', rank_estimate='violator_count'),
    'auc': dict(loss='auc'),
    'adaptive': dict(sampler='adaptive', violators='all', rank_estimate='violator_count',
                     rank_scale=0.1),
}


@pytest.mark.parametrize('tables', ['rows', 'whole'])
@pytest.mark.parametrize('objective', sorted(OBJECTIVES) + ['exact'])
def test_a_row_is_its_pairs_sharing_the_draws(objective, tables):
  """The gradient of a batch of Q-pair rows equals that of its real pairs one
  a row, each pair given its row's draws; so do the loss and the counts."""
  cfg = helpers.step_config(Y, dim=8, num_draws=10, max_norm=1.0, tables=tables,
                            **({'loss': 'exact'} if objective == 'exact' else OBJECTIVES[objective]))
  params = step_lib.init_state(jax.random.PRNGKey(0), d, cfg).params
  params = model.Params(*(model.project_rows(p * 6, 1.0) for p in params))  # pairs violate
  stream = batching.PairStream(_data(), 16, 0, positives_per_row=Q)
  rows, pairs, row_of = jax.device_put(_as_pairs(stream, 2))
  assert 0 < rows.weight_BxQ.mean() < 1  # real pairs and padding both
  if objective == 'exact':
    grads = jax.jit(functools.partial(step_lib.exact_row_grads, cfg))  # (eager: many small ops)
    (g_rows, s_rows), (g_pairs, s_pairs) = (grads(params, b) for b in (rows, pairs))
  else:
    sampler = (adaptive_sampler.refresh(params.W_YxD, 0) if cfg.loss.sampler == 'adaptive'
               else None)
    u_BxK = step_lib.draw_uniforms(cfg, jax.random.PRNGKey(1), rows.num_pos_B)
    grads = jax.jit(functools.partial(step_lib.sampled_row_grads, cfg))  # (eager: many small ops)
    g_rows, s_rows = grads(params, rows, u_BxK, sampler)
    g_pairs, s_pairs = grads(params, pairs, u_BxK[row_of], sampler)
    assert float(s_rows['violator_found']) > 0  # not vacuous
  assert s_rows.keys() == s_pairs.keys()
  for k in s_rows:
    assert float(s_rows[k]) == pytest.approx(float(s_pairs[k]), rel=1e-5, abs=1e-5), k
  for got, want, n in ((g_rows.V, g_pairs.V, d), (g_rows.W, g_pairs.W, Y)):
    want_dense = _dense(want, n)
    assert np.abs(want_dense).max() > 1e-3
    # (atol: sums of terms up to ~6 in another order, as a GPU's scatter-adds take them)
    np.testing.assert_allclose(_dense(got, n), want_dense, rtol=1e-4, atol=1e-5)

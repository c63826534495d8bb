"""Reading a table whole by matmuls (wsabie/table_reads.py) is the gathered-rows update."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.core import model
from wsabie_jax.core import row_optim
from wsabie_jax.data import batching, synthetic
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.wsabie import table_reads
from wsabie_jax.wsabie import warp

# Two forms of the same arithmetic compared: float32 matmuls on any device.
pytestmark = pytest.mark.usefixtures('float32_matmuls')

Y, d = 40, 120


def _cfg(**kw):
  return helpers.step_config(Y, **{**dict(dim=8, num_draws=10, learning_rate=0.2,
                                          optimizer='adagrad', max_norm=1.0), **kw})


def test_by_size_reads_whole_only_where_cheaper_and_possible():
  small = _cfg(num_draws=10)  # Y 40 ≤ 8·(10 + 1), its gathered rows in the caches
  assert table_reads.choose(small, 64, 1, 64 * 10, 300) == table_reads.Whole(True, False)  # 64·300 > 20·640
  assert table_reads.choose(small, 64, 1, 64 * 10, 20).features  # 64·20 ≤ 20·640
  assert not table_reads.choose(helpers.step_config(1000, num_draws=10), 64, 1, 640, d).labels
  # Gathered rows past the caches (B 4,096 · 11–13 pieces · D 128 floats > 16 MiB):
  # a row's Q positives are gathered label rows too: Y 300 > 24·(10 + 1), ≤ 24·(10 + 3).
  big = dict(num_draws=10, dim=128)
  assert not table_reads.choose(helpers.step_config(300, **big), 4096, 1, 640, d).labels
  assert table_reads.choose(helpers.step_config(300, **big), 4096, 3, 640, d).labels
  # In the caches a gather is cheap: whole only up to 8·(K+Q). The default job's
  # shapes (Y 2,000, K 100, Q 1, B 256, D 64) read by rows; the same Y at B 1,024,
  # D 128 (53 MB gathered) whole.
  assert table_reads.choose(helpers.step_config(88, num_draws=10), 64, 1, 640, d).labels
  assert not table_reads.choose(helpers.step_config(89, num_draws=10), 64, 1, 640, d).labels
  default = dict(num_draws=100, dim=64)
  assert not table_reads.choose(helpers.step_config(2000, **default), 256, 1, 640, d).labels
  assert table_reads.choose(helpers.step_config(2000, num_draws=100, dim=128), 1024, 1, 640,
                            d).labels
  assert table_reads.choose(_cfg(tables='whole'), 64, 1, 1, 10**6) == table_reads.Whole(True, True)
  assert table_reads.choose(_cfg(tables='labels'), 64, 1, 1, 10**6) == table_reads.Whole(True, False)
  assert table_reads.choose(_cfg(tables='features'), 64, 1, 1, 10**6) == table_reads.Whole(False, True)
  for kw in (dict(tables='rows'), dict(score='neg_euclidean'), dict(l2=0.01)):
    assert table_reads.choose(_cfg(**kw), 64, 1, 640, 20) == table_reads.Whole(False, False), kw
  # The exact rank scores every label either way: whole up to a chunk's worth.
  assert table_reads.choose(_cfg(loss='exact'), 64, 1, 640, 300) == table_reads.Whole(True, False)
  assert not table_reads.choose(_cfg(loss='exact', label_chunk=16), 64, 1, 640, 300).labels
  # Draws shared by the batch are scored by a B×K matmul: whole only where Y ≤ K + Q.
  assert not table_reads.choose(_cfg(draws='per_batch', num_draws=30), 64, 9, 640, d).labels
  assert table_reads.choose(_cfg(draws='per_batch', num_draws=30), 64, 10, 640, d).labels


OBJECTIVES = {
    'warp_first': dict(),
    'warp_all': dict(violators='all', rank_estimate='violator_count'),
    'auc_logistic': dict(loss='auc', pairwise='logistic', optimizer='sgd'),
    'adaptive': dict(sampler='adaptive', violators='all', rank_estimate='violator_count',
                     rank_scale=0.1, refresh_every_pairs=64),
    # draws shared by the batch's rows: 'rows' scores them by batch_draws' matmul
    'per_batch_first': dict(draws='per_batch'),
    'per_batch_all': dict(draws='per_batch', violators='all', rank_estimate='violator_count'),
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


@pytest.mark.parametrize('live_rows', [[0, 3], [0, 1, 2, 3, 4, 5]], ids=['few_live', 'many_live'])
def test_label_grads_of_the_live_rows_only_are_the_full_ones(live_rows):
  """table_reads.label_grads with at most B/4 rows sloped (their products
  compacted to B/4, fillers naming row 0) and with more (every row) against
  numpy's C (B×Y): ∂/∂images = C·W, ∂/∂W = Cᵀ·images, the Adagrad terms,
  and W's update."""
  rng = np.random.default_rng(4)
  B, Q, M, D = 16, 2, 5, 8
  W = model.project_rows(jnp.asarray(rng.normal(0, 0.5, (Y, D)), jnp.float32), 1.0)
  image = jnp.asarray(rng.normal(0, 1, (B, D)), jnp.float32)
  label, neg = rng.integers(0, Y, (B, Q)), rng.integers(0, Y, (B, M))
  live = np.isin(np.arange(B), live_rows)
  a_BxQ = (rng.normal(0, 1, (B, Q)) * live[:, None]).astype(np.float32)
  b_BxM = (rng.normal(0, 1, (B, M)) * live[:, None]).astype(np.float32)
  loss_of = lambda pos, negs: jnp.sum(a_BxQ * pos) + jnp.sum(b_BxM * negs)
  _, g_image, gW = jax.jit(lambda W, image: table_reads.label_grads(
      W, image, jnp.asarray(label), jnp.asarray(neg), loss_of, jnp.zeros((B, Q)),
      jnp.zeros((B, M))))(W, image)
  rows = np.arange(B)[:, None]
  C = np.zeros((B, Y))
  np.add.at(C, (rows, label), a_BxQ)
  np.add.at(C, (rows, neg), b_BxM)
  sq_Bx1 = np.mean(np.square(np.asarray(image, np.float64)), -1, keepdims=True)
  sq_Y = np.zeros(Y)
  np.add.at(sq_Y, label, np.square(a_BxQ) * sq_Bx1)
  np.add.at(sq_Y, neg, np.square(b_BxM) * sq_Bx1)
  np.testing.assert_allclose(g_image, C @ np.asarray(W), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(gW.grad_NxD, C.T @ np.asarray(image), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(gW.sq_N, sq_Y, rtol=1e-5, atol=1e-7)
  touched = np.zeros(Y, bool)
  touched[label[live]] = touched[neg[live]] = True
  assert np.all(np.asarray(gW.touched_N)[touched])
  opt = dict(learning_rate=0.3, optimizer='adagrad', max_norm=1.0)
  acc = jnp.full((Y,), 0.1)
  want = row_optim.update_dense(W, acc, row_optim.DenseGrad(
      jnp.asarray(C.T @ np.asarray(image), jnp.float32), jnp.asarray(sq_Y, jnp.float32),
      jnp.asarray(touched)), **opt)
  for a, b in zip(row_optim.update_dense(W, acc, gW, **opt), want):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('Q,Yl', [(2, 13), (3, 77)])  # 77: the CPU's sums in 32-label slices, the last padded
def test_exact_rank_read_whole_equals_the_full_matrix(Q, Yl):
  """table_reads.exact_label_grads against autodiff of warp.exact_rank_loss on
  S = images·Wᵀ, each row's Q pairs (padding weighted 0) summed: loss,
  ∂/∂images, ∂/∂W, and each W row's Adagrad term Σ_b (∂/∂S_by)²·mean(image_b²)."""
  image, W, pos, mask = helpers.ranking_problem(0, 7, Yl, 5, 3)
  label = pos[:, :Q].copy()
  weight = np.where(label < Yl, 1.0, 0.0).astype(np.float32)
  label = np.where(label < Yl, label, 0).astype(np.int32)
  weight[2, 0] = 0.5

  def full_of_scores(S):
    return sum(jnp.sum(weight[:, q] * warp.exact_rank_loss(S, jnp.asarray(label[:, q]), mask, Yl,
                                                           'harmonic', 0.5)) for q in range(Q))

  def full(x, W):
    return full_of_scores(x @ W.T)

  want_loss, (want_dx, want_dW) = jax.value_and_grad(full, (0, 1))(image, W)
  dS = jax.grad(full_of_scores)(image @ W.T)
  want_sq = jnp.square(dS).T @ jnp.mean(jnp.square(image), -1)
  loss, dx, dW, rank = table_reads.exact_label_grads(
      W, image, jnp.asarray(label), jnp.asarray(weight), jnp.asarray(pos), rank_weights='harmonic',
      margin=0.5)
  assert float(want_loss) > 0
  # the rank: each pair's negatives scoring above its positive's score − margin
  S = np.asarray(image @ W.T)
  pos_score = np.take_along_axis(S, label, 1)[..., None]
  np.testing.assert_array_equal(
      rank, helpers.violator_counts(S[:, None], pos_score, np.asarray(mask)[:, None], 0.5))
  np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
  np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(dW.grad_NxD, want_dW, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(dW.sq_N, want_sq, rtol=1e-4, atol=1e-6)
  np.testing.assert_array_equal(dW.touched_N, np.any(np.asarray(dS) != 0, 0))


def test_exact_rank_read_whole_gives_the_chunked_update():
  """With SGD (no Adagrad terms, whose pieces the two paths cut differently)
  five exact-rank steps reading the labels whole equal the chunked rows path."""
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=6), 300)
  stream = batching.PairStream(ds, 32, 0, positives_per_row=2)
  runs = []
  for kind in ('rows', 'labels'):
    cfg = _cfg(tables=kind, loss='exact', optimizer='sgd', label_chunk=16)
    state = step_lib.init_state(jax.random.PRNGKey(0), d, cfg)
    state = state._replace(params=_grown(state.params))
    step, losses = step_lib.make_train_step(cfg), []
    for s in range(5):
      state, st = step(state, jax.device_put(stream.batch(s)))
      losses.append(float(st['loss']))
    runs.append((state, losses))
  (rows, rows_loss), (whole, whole_loss) = runs
  assert min(rows_loss) > 0
  np.testing.assert_allclose(whole_loss, rows_loss, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(rows), jax.tree.leaves(whole)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-5, atol=2e-6)
  start = _grown(step_lib.init_state(jax.random.PRNGKey(0), d, cfg).params)
  assert np.abs(np.asarray(whole.params.W_YxD) - np.asarray(start.W_YxD)).max() > 1e-3


def _grown(params):
  return model.Params(*(model.project_rows(p * 6, 1.0) for p in params))

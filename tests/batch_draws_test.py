"""Draws shared by a batch's rows (wsabie/batch_draws.py): each pair's estimator
is Alg. 1's over its valid draws, and the step's update is the one the whole
label table gives for the same draws."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from tests import helpers
from wsabie_jax.wsabie import batch_draws, rank_weighting, warp

Y, P, K = 50, 5, 20  # a tenth of the shared draws hit the row's positives
POSITIVES = jnp.arange(0, 2 * P, 2, dtype=jnp.int32)  # labels 0, 2, …, 8
TRIALS = 40_000


def _reference_weight(num_violators: int, estimate: str) -> float:
  """E[L(r̂)·1{found}] (float64) when K draws over all Y labels are made and
  the ones on the P positives are no trial: V ~ Bin(K, n/Y) valid draws, i.i.d.
  uniform over the n = Y − P negatives, k of them violators."""
  n, k = Y - P, num_violators
  L, p = rank_weighting.harmonic_table(n), k / n
  prob_V = stats.binom.pmf(np.arange(K + 1), K, n / Y)
  total = 0.0
  for V in range(1, K + 1):
    if estimate == 'first_violator':  # the first violator at valid trial N ≤ V
      N = np.arange(1, V + 1)
      total += prob_V[V] * np.sum((1 - p) ** (N - 1) * p * L[n // N])
    else:  # v violators among the V valid draws
      v = np.arange(1, V + 1)
      total += prob_V[V] * np.sum(stats.binom.pmf(v, V, p) * L[(n * v) // V])
  return total


@pytest.mark.parametrize('estimate', warp.RANK_ESTIMATES)
@pytest.mark.parametrize('num_violators', [1, 4, 15])
def test_each_pair_weighs_as_alg_1_over_its_valid_draws(estimate, num_violators):
  """The mean weight of TRIALS batches' shared draws, through batch_draws and
  warp.find_violator, against the exact expectation: within 4 standard errors
  (seed fixed). The positives score as violators: a hit counted as a trial or
  as a violator moves the mean by many standard errors."""
  violator = jnp.zeros((Y,), bool).at[jnp.arange(1, 2 * P, 2)[:num_violators]].set(True)
  violator = violator.at[2 * P:2 * P + max(num_violators - P, 0)].set(True)
  assert int(violator.sum()) == num_violators and not bool(violator[POSITIVES].any())
  score_Y = jnp.where(violator, 1.0, -1.0).at[POSITIVES].set(1.0)

  def weight(key):
    neg_1xK, valid_1xK = batch_draws.negatives(batch_draws.draw(key, K, Y), POSITIVES[None])
    return warp.find_violator(jnp.float32(0.5), score_Y[neg_1xK[0]], jnp.int32(Y - P),
                              valid_1xK[0], num_labels=Y, rank_estimate=estimate,
                              margin=0.0, min_negatives=Y - P).weight_B

  keys = jax.random.split(jax.random.PRNGKey(num_violators), TRIALS)
  w = np.asarray(jax.jit(jax.vmap(weight))(keys), np.float64)
  expected = _reference_weight(num_violators, estimate)
  assert abs(w.mean() - expected) < 4 * w.std() / np.sqrt(TRIALS), (w.mean(), expected)


def test_the_running_count_and_the_masked_sums_agree():
  """find_violator's two ways to count trials (min_negatives static) give the
  same fields wherever the cap cannot bind."""
  rng = np.random.default_rng(0)
  scores_BxK = jnp.asarray(rng.normal(size=(256, K)), jnp.float32)
  valid_BxK = jnp.asarray(rng.random((256, K)) > 0.2)
  for estimate in warp.RANK_ESTIMATES:
    out = [warp.find_violators(jnp.zeros(256), scores_BxK, jnp.full(256, Y - P), Y,
                               rank_estimate=estimate, valid_BxK=valid_BxK, min_negatives=m)
           for m in (0, Y - P)]
    for a, b in zip(*out):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_draws_are_uniform_over_every_label():
  ids = np.asarray(batch_draws.draw(jax.random.PRNGKey(3), 200_000, Y))
  counts = np.bincount(ids, minlength=Y)
  assert ids.min() >= 0 and ids.max() < Y
  assert stats.chisquare(counts).pvalue > 1e-3


def test_label_grads_are_the_gathered_gradients():
  """The matmul form's image gradient and pieces (summed per label) equal
  autodiff of the same loss through gathered rows; each piece's Adagrad term
  is Σ_b slope²·mean(image_b²)."""
  rng = np.random.default_rng(1)
  B, Q, D = 6, 3, 4
  W = jnp.asarray(rng.normal(size=(Y, D)), jnp.float32)
  image = jnp.asarray(rng.normal(size=(B, D)), jnp.float32)
  label_BxQ = jnp.asarray(rng.integers(0, Y, (B, Q)), jnp.int32)
  ids_K = jnp.asarray(rng.integers(0, Y, K), jnp.int32)
  w_BxQxK = jnp.asarray(rng.random((B, Q, K)) * (rng.random((B, Q, K)) < 0.3), jnp.float32)
  loss_of = lambda pos, neg: jnp.sum(w_BxQxK * warp.hinge(pos[..., None], neg[:, None], 1.0))

  pos, neg, W_pos, W_drawn = batch_draws.scores(W, image, label_BxQ, ids_K)
  loss, g_image, pieces = batch_draws.label_grads(W_pos, W_drawn, ids_K, image, label_BxQ, None,
                                                  loss_of, pos, neg)

  def gathered(W, image):
    return loss_of(jnp.einsum('bd,bqd->bq', image, W[label_BxQ]), image @ W[ids_K].T)

  want_loss, (want_gW, want_g_image) = jax.value_and_grad(gathered, (0, 1))(W, image)
  np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
  np.testing.assert_allclose(g_image, want_g_image, rtol=1e-5, atol=1e-5)
  summed = jnp.zeros_like(W).at[pieces.rows_R].add(pieces.grads_RxD)
  np.testing.assert_allclose(summed, want_gW, rtol=1e-5, atol=1e-5)
  slope_BxK = jax.grad(loss_of, 1)(pos, neg)
  sq_K = (jnp.square(slope_BxK) * jnp.mean(jnp.square(image), -1)[:, None]).sum(0)
  np.testing.assert_allclose(pieces.sq_R[B * Q:], sq_K, rtol=1e-5)
  assert float(jnp.abs(slope_BxK).sum()) > 0  # not vacuous


def test_settings_reject_what_shared_draws_cannot_do():
  with pytest.raises(ValueError, match="draws='per_batch'"):
    helpers.step_config(Y, loss='auc', draws='per_batch')
  with pytest.raises(ValueError, match="draws='per_batch'"):
    helpers.step_config(Y, draws='per_batch', score='neg_euclidean')
  with pytest.raises(ValueError, match="draws='per_batch'"):
    helpers.step_config(Y, draws='per_batch', l2=0.01)


# --- the whole step with several positives a row, against Alg. 1 pair by pair ---

def _alg1_reference(image_BxD, W_YxD, label_BxQ, weight_BxQ, pos_sets, ids_K, margin,
                    violators='first', cap=True):
  """Paper 000 Alg. 1 for each real pair in plain numpy (float64): walk the
  shared draws in order, skip those on the row's positives, stop after
  Y − |P| trials (`cap`). 'first': the first violator ȳ at trial N weighs
  L(⌊(Y − |P|)/N⌋) (harmonic) on |margin − f_y + f_ȳ|₊; 'all' (the violator
  count): v violators among the T trials made give L(⌊(Y − |P|)·v/T⌋), each
  violator weighing it / v. Returns (loss, ∂/∂W, the (row, draw) picks)."""
  Y = W_YxD.shape[0]
  L = lambda rank: np.sum(1.0 / np.arange(1, rank + 1))
  loss, grad, picks = 0.0, np.zeros_like(W_YxD), []
  for b, (labels, weights) in enumerate(zip(label_BxQ, weight_BxQ)):
    n = Y - len(pos_sets[b])
    for y, w in zip(labels, weights):
      if w == 0:
        continue
      f_y = image_BxD[b] @ W_YxD[y]
      trials = [(k, neg) for k, neg in enumerate(ids_K) if neg not in pos_sets[b]]
      trials = trials[:n] if cap else trials
      hits = [(t, k, neg) for t, (k, neg) in enumerate(trials, 1)
              if image_BxD[b] @ W_YxD[neg] > f_y - margin]
      if not hits:
        continue
      if violators == 'first':
        hits, weight = hits[:1], L(n // hits[0][0])
      else:
        weight = L(n * len(hits) // len(trials)) / len(hits)
      for _, k, neg in hits:
        loss += w * weight * (margin - f_y + image_BxD[b] @ W_YxD[neg])
        grad[y] -= w * weight * image_BxD[b]
        grad[neg] += w * weight * image_BxD[b]
        picks.append((b, k))
  return loss, grad, picks


@pytest.mark.usefixtures('float32_matmuls')
@pytest.mark.parametrize('violators', ['first', 'all'])
@pytest.mark.parametrize('case', ['all_violate', 'cap_binds'])
def test_a_step_of_shared_draws_with_several_pairs_a_row_is_alg_1_pair_by_pair(case, violators):
  """loss.draws='per_batch', the first violator or all of them, Q = 4 pairs a row: the step's
  loss and W gradient against `_alg1_reference`. 'all_violate': small rows,
  every draw violates, so a row's pairs all pick its first valid draw: their
  slopes must be summed (one kept instead of the sum was the whole error, the
  loss unchanged). 'cap_binds': K = 12 draws over Y = 9 labels, rows with up
  to 7 positives, and the labels drawn first score low: a violator past trial
  Y − |P| must not count."""
  from wsabie_jax.core import model
  from wsabie_jax.data import batching, synthetic
  from wsabie_jax.wsabie import step as step_lib, table_reads
  Yr, Kr, margin = 9, 12, 0.5
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=Yr, num_features=30, nnz=5,
                                                  mean_labels=5.0, max_labels=7), 64)
  batch = jax.device_put(batching.PairStream(ds, 16, 0, positives_per_row=4).batch(0))
  cfg = helpers.step_config(Yr, dim=6, num_draws=Kr, draws='per_batch', tables='rows',
                            max_norm=100.0, margin=margin, violators=violators,
                            rank_estimate={'first': 'first_violator',
                                           'all': 'violator_count'}[violators])
  ids_K = batch_draws.draw(jax.random.PRNGKey(5), Kr, Yr)
  rng = np.random.default_rng(2)
  if case == 'all_violate':
    params = model.Params(jnp.asarray(rng.normal(0, 0.05, (30, 6)), jnp.float32),
                          jnp.asarray(rng.normal(0, 0.05, (Yr, 6)), jnp.float32))
  else:  # every image along u; labels drawn in the first half score −1 along it, the rest +1
    u = rng.normal(0, 1, 6)
    late = ~np.isin(np.arange(Yr), np.asarray(ids_K)[:Kr // 2])
    params = model.Params(jnp.asarray(np.abs(rng.normal(0, 1, (30, 1))) * u, jnp.float32),
                          jnp.asarray(np.where(late, 1.0, -1.0)[:, None] * u, jnp.float32))
  grads, stats = jax.jit(step_lib.sampled_row_grads, static_argnums=0)(cfg, params, batch, ids_K)
  image = np.asarray(table_reads.embed(params.V_dxD, batch, 16, False)[0], np.float64)
  pos_sets = [set(int(y) for y in row if y < Yr) for row in np.asarray(batch.pos_BxP)]
  args = (image, np.asarray(params.W_YxD, np.float64), np.asarray(batch.label_BxQ),
          np.asarray(batch.weight_BxQ), pos_sets, np.asarray(ids_K), margin, violators)
  want_loss, want_gW, picks = _alg1_reference(*args)
  got_gW = np.zeros((Yr, 6))
  np.add.at(got_gW, np.asarray(grads.W.rows_R), np.asarray(grads.W.grads_RxD, np.float64))
  assert float(stats['loss']) == pytest.approx(want_loss, rel=1e-5)
  np.testing.assert_allclose(got_gW, want_gW, rtol=1e-4, atol=1e-5)
  if case == 'all_violate':  # not vacuous: rows whose pairs share a pick
    assert len(picks) > len(set(picks)) + 5, picks
  else:  # not vacuous: uncapped, pairs find violators past trial Y − |P|
    uncapped_loss, _, uncapped_picks = _alg1_reference(*args, cap=False)
    assert set(uncapped_picks) > set(picks)
    if violators == 'all':  # (the first one's weigh L(0) = 0; these change v and T)
      assert abs(uncapped_loss - want_loss) > 1e-3

"""The VSE-ens sampler (paper 003): rank invariance, its law, its draws, its refresh."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from wsabie_jax.wsabie import adaptive_sampler as vse
from wsabie_jax.core import samplers
from tests import helpers
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.wsabie import warp
from wsabie_jax.data import batching, synthetic


def _tables(Y=300, D=16, B=4, seed=0):
  rng = np.random.default_rng(seed)
  W_YxD = jnp.asarray(rng.normal(0.3, 1.0, (Y, D)) * rng.uniform(0.2, 2.0, D), jnp.float32)
  image_BxD = jnp.asarray(rng.normal(0, 1, (B, D)), jnp.float32)
  return image_BxD, W_YxD


def test_normalized_scores_rank_labels_as_the_dot_product():
  """Eq. (7): s* = s − (a constant per image), so both give the same ranking."""
  image_BxD, W_YxD = _tables()
  sampler = vse.refresh(W_YxD, 0)
  s_BxY = np.asarray(image_BxD, np.float64) @ np.asarray(W_YxD, np.float64).T  # not TF32
  s_star_BxY = np.asarray(vse.normalized_scores(image_BxD, W_YxD, sampler), np.float64)
  offset_BxY = s_BxY - s_star_BxY
  np.testing.assert_allclose(offset_BxY, offset_BxY[:, :1].repeat(300, 1), atol=1e-4)
  np.testing.assert_array_equal(np.argsort(-s_BxY, 1), np.argsort(-s_star_BxY, 1))


def test_refresh_sorts_each_factor_and_inverts_the_order():
  _, W_YxD = _tables()
  sampler = vse.refresh(W_YxD, 7)
  W = np.asarray(W_YxD)
  order = np.asarray(sampler.order_DxY)
  for f in range(W.shape[1]):
    assert np.all(np.diff(W[order[f], f]) <= 0)
    np.testing.assert_array_equal(np.asarray(sampler.position_YxD)[order[f], f], np.arange(300))
  np.testing.assert_allclose(sampler.std_D, W.std(0), rtol=1e-5)
  assert int(sampler.refreshed_at) == 7


def test_draws_follow_the_proposal_law():
  """Empirical frequencies of `draw` against `proposal_prob` (chi-square, p > 1e-3)."""
  image_BxD, W_YxD = _tables(Y=25, D=3, B=1, seed=1)
  sampler = vse.refresh(W_YxD, 0)
  n = 200_000
  u = vse.draw_uniforms(jax.random.PRNGKey(0), 1, n)
  labels = np.asarray(vse.draw(sampler, image_BxD, u, rank_scale=0.2))[0]
  q_Y = np.asarray(vse.proposal_prob(sampler, image_BxD, jnp.arange(25)[None], 0.2))[0]
  assert q_Y.sum() == pytest.approx(1.0, abs=1e-5)
  observed = np.bincount(labels, minlength=25)
  keep = q_Y * n >= 5
  q_keep = q_Y[keep].astype(np.float64)
  expected = q_keep / q_keep.sum() * observed[keep].sum()
  assert observed[~keep].sum() <= 5 * max(1, (~keep).sum())
  assert stats.chisquare(observed[keep], expected).pvalue > 1e-3


def test_sampled_labels_rank_far_higher_than_uniform_draws():
  """For a fixed image, the adaptive draws' true ranks (by s) against uniform
  draws', Y = 2,000, D = 16, λ = 0.01: at least 2.5× as many land in the true top
  10% (measured 3.0×), and their median rank is under half of uniform's.
  (One factor is a weak proxy for a 16-term dot product on isotropic tables;
  the gain is larger at small D and on trained, structured tables.)"""
  image_BxD, W_YxD = _tables(Y=2000, D=16, B=1, seed=2)
  sampler = vse.refresh(W_YxD, 0)
  u = vse.draw_uniforms(jax.random.PRNGKey(1), 1, 5000)
  labels = np.asarray(vse.draw(sampler, image_BxD, u, rank_scale=0.01))[0]
  true_rank_Y = np.empty(2000, int)
  true_rank_Y[np.argsort(-(np.asarray(image_BxD) @ np.asarray(W_YxD).T)[0])] = np.arange(2000)
  uniform = np.random.default_rng(0).integers(0, 2000, 5000)
  top_adaptive, top_uniform = (np.mean(true_rank_Y[x] < 200) for x in (labels, uniform))
  assert top_adaptive > 2.5 * top_uniform, (top_adaptive, top_uniform)
  assert np.median(true_rank_Y[labels]) < 0.5 * np.median(true_rank_Y[uniform])


def test_importance_rank_estimate():
  """With q uniform on the negatives it is the violator-count estimate; with the
  adaptive q its mean is the true violator count (before the floor; 4 s.e. + 1)."""
  rng = np.random.default_rng(3)
  violates = jnp.asarray(rng.random((50, 20)) < 0.3)
  num_neg = jnp.full((50,), 99)
  weight_B, per_draw = warp.importance_weights(violates, jnp.full((50, 20), 1 / 99), num_neg, 100)
  ref = warp.find_violators(jnp.zeros(50), jnp.where(violates, 1.0, -5.0), num_neg, 100,
                            rank_estimate='violator_count')
  np.testing.assert_allclose(weight_B, ref.weight_B, rtol=1e-6)
  np.testing.assert_allclose(per_draw.sum(1), weight_B, rtol=1e-5)

  image_BxD, W_YxD = _tables(Y=500, D=8, B=1, seed=4)
  sampler = vse.refresh(W_YxD, 0)
  s_Y = (np.asarray(image_BxD) @ np.asarray(W_YxD).T)[0]
  violator_Y = s_Y > np.sort(s_Y)[-41]          # the top 40 labels violate
  trials, K = 4000, 10
  u = vse.draw_uniforms(jax.random.PRNGKey(2), trials, K)
  labels = vse.draw(sampler, jnp.repeat(image_BxD, trials, 0), u, rank_scale=0.05)
  q = vse.proposal_prob(sampler, jnp.repeat(image_BxD, trials, 0), labels, 0.05)
  estimate = np.asarray(jnp.sum(jnp.where(jnp.asarray(violator_Y)[labels], 1 / q, 0), 1) / K)
  stderr = estimate.std() / np.sqrt(trials)
  assert abs(estimate.mean() - 40) < 4 * stderr + 1, (estimate.mean(), stderr)


def _adaptive_cfg(**kw):
  return helpers.step_config(**{**dict(num_labels=60, dim=8, num_draws=20, sampler='adaptive',
                                       violators='all', rank_estimate='violator_count',
                                       rank_scale=0.05), **kw})


def test_positives_are_never_updated_as_negatives():
  """Images whose positives are the labels the sampler favours: draws hit them,
  and no negative slot of the step's gradient belongs to a positive (the
  gathered rows' pieces show it per pair: tables='rows')."""
  spec = synthetic.SyntheticSpec(num_labels=60, num_features=300, nnz=10)
  ds = synthetic.generate(spec, 200)
  batch = batching.PairStream(ds, 64, 0).batch(0)
  for loss in ('warp', 'auc'):
    cfg = _adaptive_cfg(loss=loss, tables='rows')
    state = step_lib.init_state(jax.random.PRNGKey(0), 300, cfg)
    # Make each image's positives its top-scoring labels: W_y += image for y ∈ P.
    image = np.asarray(step_lib.model.embed_packed(state.params.V_dxD, batch, 64)[0])
    W = np.asarray(state.params.W_YxD).copy()
    for b in range(64):
      W[batch.pos_BxP[b, :batch.num_pos_B[b]]] += 3 * image[b]
    params = state.params._replace(W_YxD=jnp.asarray(W))
    sampler = vse.refresh(params.W_YxD, 0)
    u = step_lib.draw_uniforms(cfg, jax.random.PRNGKey(1), jnp.asarray(batch.num_pos_B))
    negs = np.asarray(vse.draw(sampler, jnp.asarray(image), u, cfg.loss.rank_scale))
    hits = np.asarray(samplers.is_positive(jnp.asarray(negs), jnp.asarray(batch.pos_BxP)))
    assert hits.mean() > 0.05  # the test is not vacuous
    grads, _ = jax.jit(step_lib.sampled_row_grads, static_argnums=0)(
        cfg, params, jax.device_put(batch), u, sampler)  # one compile, not ~100 ops
    neg_rows = np.asarray(grads.W.rows_R)[64:].reshape(64, -1)
    moved = np.abs(np.asarray(grads.W.grads_RxD)[64:]).sum(-1).reshape(64, -1) > 0
    for b in range(64):
      assert not np.isin(neg_rows[b][moved[b]], batch.pos_BxP[b]).any()


def test_refresh_happens_on_schedule_and_matches_W():
  spec = synthetic.SyntheticSpec(num_labels=60, num_features=300, nnz=10)
  ds = synthetic.generate(spec, 200)
  stream = batching.PairStream(ds, 16, 0)
  cfg = _adaptive_cfg(refresh_every_pairs=3 * 16, learning_rate=0.5)  # every 3 steps
  state = step_lib.init_state(jax.random.PRNGKey(0), 300, cfg)
  step = step_lib.make_train_step(cfg)
  W_before = {}
  for s in range(8):
    W_before[s] = np.asarray(state.params.W_YxD)
    state, _ = step(state, jax.device_put(stream.batch(s)))
  assert int(state.sampler.refreshed_at) == 6
  W = W_before[6]
  order = np.asarray(state.sampler.order_DxY)
  for f in range(8):
    assert np.all(np.diff(W[order[f], f]) <= 0)
  assert not np.array_equal(order, np.asarray(vse.refresh(jnp.asarray(W_before[3]), 3).order_DxY))


def test_bad_adaptive_configs_are_errors():
  with pytest.raises(ValueError, match="violators='all'"):
    step_lib.LossConfig(sampler='adaptive')
  with pytest.raises(ValueError, match='exact'):
    step_lib.LossConfig(sampler='adaptive', kind='exact')
  with pytest.raises(ValueError, match='rank_scale'):
    _adaptive_cfg(rank_scale=2.0)


def test_importance_weights_are_unbiased_for_a_non_uniform_proposal():
  """Brute-force expectation over every tuple of K draws from a non-uniform q
  (1/q = 2, 4, 4: the estimates are whole numbers, so the floor is exact).
  E[r̂] is the true violator count, so with linear L (mean_rank) E[L(r̂)] = L(#viol)
  exactly; with K = 1 every violator's expected weight is L(#viol)/#viol, eq. (6).
  A uniform 1/q (the violator-count estimate) gets both wrong here."""
  import itertools
  Y, support, q = 10, np.asarray([3, 5, 8]), np.asarray([0.5, 0.25, 0.25])
  num_neg = jnp.asarray(Y - 1)
  for violators in ({3}, {5}, {3, 8}, {5, 8}, {3, 5, 8}):
    count = len(violators)
    for K in (1, 2):  # 1/q even: Σ viol/q over K ≤ 2 draws divides by K
      mean_weight, per_label = 0.0, np.zeros(Y)
      for draw in itertools.product(range(3), repeat=K):
        labels = support[list(draw)]
        prob = np.prod(q[list(draw)])
        viol = jnp.asarray([y in violators for y in labels])
        w, per_draw = warp.importance_weight(viol, jnp.asarray(q[list(draw)], jnp.float32),
                                             num_neg, num_labels=Y, rank_weights='mean_rank')
        mean_weight += prob * float(w)
        np.add.at(per_label, labels, prob * np.asarray(per_draw, np.float64))
      assert mean_weight == pytest.approx(count / (Y - 1), rel=1e-5), (violators, K)
      if K == 1:
        for y in range(Y):
          want = 1 / (Y - 1) if y in violators else 0.0  # L(count)/count each
          assert per_label[y] == pytest.approx(want, rel=1e-5, abs=1e-9), (violators, y)


def test_factor_law_is_eq_8_with_sigma():
  """Draws at rank 0 (λ·Y = 0.01) name their factor: factor f's top label when
  v_if > 0, its bottom one otherwise. Their frequencies follow p(f|i) ∝ |v_if|·σ_f,
  eq. (8), computed here from W's column spreads (chi-square, p > 1e-3); the
  factors' σ_f differ 8-fold, so dropping σ_f fails (p < 1e-100)."""
  D, Y = 4, 12
  rng = np.random.default_rng(7)
  spread_D = np.asarray([0.25, 0.5, 1.0, 2.0])
  W = rng.uniform(-0.1, 0.1, (Y, D)) * spread_D
  for f in range(D):
    W[f, f], W[D + f, f] = 3 * spread_D[f], -3 * spread_D[f]  # f's top and bottom labels
  image = np.asarray([[0.7, -1.2, 0.4, -0.3]])
  sampler = vse.refresh(jnp.asarray(W, jnp.float32), 0)
  n = 40_000
  u = vse.draw_uniforms(jax.random.PRNGKey(5), 1, n)
  labels = np.asarray(vse.draw(sampler, jnp.asarray(image, jnp.float32), u,
                               rank_scale=0.01 / Y))[0]
  sigma_D = W.std(0)
  p_f = np.abs(image[0]) * sigma_D / np.sum(np.abs(image[0]) * sigma_D)
  label_of_f = [f if image[0, f] > 0 else D + f for f in range(D)]
  observed = np.asarray([np.sum(labels == y) for y in label_of_f])
  assert observed.sum() == n
  assert stats.chisquare(observed, p_f * n).pvalue > 1e-3
  no_sigma = np.abs(image[0]) / np.abs(image[0]).sum()
  assert stats.chisquare(observed, no_sigma * n).pvalue < 1e-100


def test_default_refresh_interval_is_y_ln_y_iterations():
  """Paper 003 Alg. 1 l. 4: re-sort every |Y|·ln|Y| iterations (one pair an
  iteration), when refresh_every_pairs is left at 0. Y = 60, B = 16:
  60·ln 60 = 245.7 pairs → every 15 steps; the step refreshes at step 15."""
  import math
  assert vse.refresh_interval_steps(60, 16) == round(60 * math.log(60) / 16) == 15
  assert vse.refresh_interval_steps(100_000, 1024) == round(100_000 * math.log(100_000) / 1024)
  assert vse.refresh_interval_steps(60, 16, every_pairs=48) == 3
  spec = synthetic.SyntheticSpec(num_labels=60, num_features=300, nnz=10)
  stream = batching.PairStream(synthetic.generate(spec, 200), 16, 0)
  cfg = _adaptive_cfg(learning_rate=0.5)
  assert cfg.loss.refresh_every_pairs == 0  # the default
  state = step_lib.init_state(jax.random.PRNGKey(0), 300, cfg)
  step = step_lib.make_train_step(cfg)
  refreshed = []
  for s in range(17):
    state, _ = step(state, jax.device_put(stream.batch(s)))
    refreshed.append(int(state.sampler.refreshed_at))
  assert refreshed == [0] * 15 + [15, 15]

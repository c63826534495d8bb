"""The expected WARP weight against k violators (Remark 1): exact formulas
against simulations of the code that trains (warp.find_violators)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.wsabie import rank_weighting as rw
from wsabie_jax.wsabie import warp


@pytest.mark.parametrize('estimator,num_draws,k', [
    ('first_violator', 20, 1), ('first_violator', 20, 7), ('violator_count', 20, 3),
    ('sequential', 0, 2), ('first_violator', 500, 4)])
def test_expected_weight_matches_the_training_code(estimator, num_draws, k):
  """200,000 pairs with k planted violators among Y − 1 = 199 negatives, draws
  i.i.d. uniform as Alg. 1's: the mean weight of find_violators is the exact
  expectation within 4 standard errors (K = Y − 1 draws for `sequential`)."""
  Y, trials = 200, 200_000
  K = num_draws or Y - 1
  rng = np.random.default_rng(k)
  neg_scores = np.where(rng.integers(0, Y - 1, (trials, K)) < k, 1.0, -5.0).astype(np.float32)
  pick = warp.find_violators(jnp.full(trials, 0.5), jnp.asarray(neg_scores),
                             jnp.full(trials, Y - 1), Y,
                             rank_estimate='violator_count' if estimator == 'violator_count'
                             else 'first_violator', margin=1.0)
  w = np.asarray(pick.weight_B, np.float64)
  want = rw.expected_weight(k, Y, estimator, num_draws)
  assert abs(w.mean() - want) < 4 * w.std() / np.sqrt(trials), (w.mean(), want)


def test_fixed_budget_flattens_the_top_weighting():
  """Paper 000 Remark 1 (α₁/α₂ = 2 exact, ≈ 1.8 for Alg. 1) and the issue's
  figures: K = 100 at Y = 2,000 gives 0.22 / 0.44 / 0.64 for k = 1, 2, 3."""
  assert rw.top_ratio(2000, 'exact') == pytest.approx(2.0)
  assert rw.top_ratio(2000, 'sequential') == pytest.approx(1.83, abs=0.01)
  np.testing.assert_allclose(rw.weight_curve((1, 2, 3), 2000, 'first_violator', 100),
                             [0.222, 0.435, 0.638], atol=2e-3)
  assert rw.top_ratio(10_000, 'first_violator', 100) == pytest.approx(1.0, abs=0.02)
  # A budget of every negative is Alg. 1 itself.
  assert rw.expected_weight(5, 300, 'first_violator', 299) == pytest.approx(
      rw.expected_weight(5, 300, 'sequential'))
  with pytest.raises(ValueError, match='violators must be in'):
    rw.expected_weight(0, 100, 'exact')


def test_adaptive_sampler_curve_rises_with_k():
  mean, err = rw.adaptive_weight_curve((1, 10, 100), 500, 50, rank_scale=0.02, dim=8, trials=800)
  assert np.all(err < 0.1) and mean[0] < mean[1] < mean[2]
  assert jax.numpy.isfinite(mean).all()

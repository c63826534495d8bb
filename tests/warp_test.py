"""WARP's parallel draws against Alg. 1, and its expected loss against eq. (6)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from wsabie_jax.core import samplers
from wsabie_jax.wsabie import warp

Y = 40
POSITIVES = np.array([3, 17, 29])


def _scores(num_violators: int, seed: int = 0):
  """Label scores for one image whose first positive has exactly `num_violators`."""
  rng = np.random.default_rng(seed)
  s = rng.uniform(-3, -0.6, Y).astype(np.float32)  # all below f_y − 1 = −0.5 …
  s[POSITIVES] = 0.5
  negatives = np.setdiff1d(np.arange(Y), POSITIVES)
  s[rng.choice(negatives, num_violators, replace=False)] = rng.uniform(0.2, 1.5, num_violators)
  return s  # … except these, which violate f_ȳ > f_y − 1 = −0.5


def _parallel_trials(scores, num_draws, n, seed):
  """N (K+1 = none) from the accelerator form: K draws in one call, first violator."""
  pos = jnp.broadcast_to(jnp.asarray(POSITIVES, jnp.int32), (n, len(POSITIVES)))
  num_pos = jnp.full((n,), len(POSITIVES), jnp.int32)
  neg = samplers.uniform_negatives(jax.random.PRNGKey(seed), pos, num_pos, Y, num_draws)
  s = jnp.asarray(scores)
  pick = warp.find_violators(jnp.full((n,), s[POSITIVES[0]]), s[neg], Y - num_pos, Y)
  return np.asarray(pick.num_trials_B), np.asarray(pick.weight_B), np.asarray(neg), np.asarray(pick.index_B)


def _sequential_trials(scores, cap, n, seed):
  """Alg. 1 lines 6–13, one draw at a time, stopped after `cap` trials."""
  rng = np.random.default_rng(seed)
  negatives = np.setdiff1d(np.arange(Y), POSITIVES)
  f_y = scores[POSITIVES[0]]
  out = np.empty(n, np.int64)
  for t in range(n):
    for trial in range(1, cap + 1):
      if scores[rng.choice(negatives)] > f_y - 1:
        break
    else:
      trial = cap + 1
    out[t] = trial
  return out


@pytest.mark.parametrize('num_violators,num_draws', [(1, 10), (4, 10), (12, 5)])
def test_parallel_draws_match_sequential_alg1_capped_at_k(num_violators, num_draws):
  scores = _scores(num_violators)
  n = 20_000
  par, _, _, _ = _parallel_trials(scores, num_draws, n, seed=1)
  seq = _sequential_trials(scores, num_draws, n, seed=2)
  bins = np.arange(1, num_draws + 3)
  table = np.stack([np.histogram(par, bins)[0], np.histogram(seq, bins)[0]])
  table = table[:, table.sum(0) > 0]
  # Two-sample chi-square homogeneity test; fixed seeds, rejection at p < 0.001.
  _, p_value, _, _ = stats.chi2_contingency(table)
  assert p_value > 1e-3, (table, p_value)
  # And both follow the truncated geometric law Pr(N > q) = (1 − k/(Y−|P|))^q of §3.
  p = num_violators / (Y - len(POSITIVES))
  expected = np.array([(1 - p) ** (q - 1) * p for q in range(1, num_draws + 1)]
                      + [(1 - p) ** num_draws]) * n
  observed = np.histogram(par, bins)[0]
  keep = expected > 5
  chi2 = np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep])
  assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_first_violator_is_a_violator_and_rank_estimate_is_floor():
  scores = _scores(5)
  trials, weight, neg, index = _parallel_trials(scores, 20, 2_000, seed=3)
  found = trials <= 20
  chosen = neg[np.arange(len(neg)), index]
  assert np.all(scores[chosen[found]] > scores[POSITIVES[0]] - 1)
  earlier = np.arange(20)[None, :] < index[:, None]
  assert not np.any((scores[neg] > scores[POSITIVES[0]] - 1) & earlier & found[:, None])
  harmonic = np.concatenate([[0], np.cumsum(1 / np.arange(1, Y))])
  rank = (Y - len(POSITIVES)) // trials[found]
  np.testing.assert_allclose(weight[found], harmonic[rank], rtol=1e-5)
  assert np.all(weight[~found] == 0)


def test_first_true_is_any_and_argmax():
  mask = np.random.default_rng(0).random((3, 50, 7)) < 0.15  # rows with none included
  mask[0, 0] = False
  found, index = warp.first_true(jnp.asarray(mask))
  np.testing.assert_array_equal(found, mask.any(-1))
  np.testing.assert_array_equal(index, mask.argmax(-1))  # 0 where none, as argmax
  assert (~mask.any(-1)).any() and mask.any(-1).any()


def test_margin_zero_counts_ties_as_paper_001():
  """Paper 001 samples until f_ȳ ≥ f_y (no margin): at margin 0 a tie violates;
  at margin 1 (paper 000, Alg. 1 l. 11) a draw must beat f_y − 1 strictly."""
  pos = jnp.asarray([2.0, 2.0])
  neg = jnp.asarray([[1.0, 2.0, 3.0], [1.0, 1.5, 1.9]])
  num_neg = jnp.asarray([9, 9])
  at_zero = warp.find_violators(pos, neg, num_neg, 10, margin=0.0)
  np.testing.assert_array_equal(at_zero.violates_BxK, [[False, True, True], [False, False, False]])
  np.testing.assert_array_equal(at_zero.num_trials_B, [2, 4])
  at_one = warp.find_violators(pos, neg, num_neg, 10, margin=1.0)
  np.testing.assert_array_equal(at_one.violates_BxK, [[False, True, True], [False, True, True]])
  np.testing.assert_array_equal(warp.violates(jnp.asarray(2.0), jnp.asarray([1.0, 1.0 + 1e-6]), 1.0),
                                [False, True])


@pytest.mark.parametrize('rank_weights', ['harmonic', 'mean_rank', 'top1'])
def test_full_budget_expectation_matches_exact_rank_loss(rank_weights):
  """With K ≥ Y−1 (no truncation), E[WARP loss] = eq. (6) with L̃ (Remark 1).

  L̃(k) = E[L(⌊(Y−1)/N_k⌋)], N_k geometric with parameter k/(Y−1): the exact-rank
  loss evaluated with L̃ in place of L, computed here from its definition.
  """
  num_violators = 6
  scores = _scores(num_violators, seed=4)
  num_neg = Y - len(POSITIVES)
  n = 100_000
  pos = jnp.broadcast_to(jnp.asarray(POSITIVES, jnp.int32), (n, 3))
  neg = samplers.uniform_negatives(jax.random.PRNGKey(5), pos, jnp.full((n,), 3), Y, num_neg)
  s = jnp.asarray(scores)
  f_y = jnp.full((n,), s[POSITIVES[0]])
  pick = warp.find_violators(f_y, s[neg], jnp.full((n,), num_neg), Y, rank_weights)
  chosen = jnp.take_along_axis(neg, pick.index_B[:, None], 1)[:, 0]
  losses = np.asarray(pick.weight_B * warp.hinge(f_y, s[chosen]))

  p = num_violators / num_neg
  q = np.arange(1, num_neg + 1)
  pmf = (1 - p) ** (q - 1) * p
  L = np.asarray(warp.rank_loss(jnp.asarray(num_neg // q), Y, rank_weights))
  L_tilde = np.sum(pmf * L)
  mask = np.zeros(Y, bool)
  mask[POSITIVES] = True
  hinges = np.where(mask, 0, np.maximum(0, 1 - scores[POSITIVES[0]] + scores))
  expected = L_tilde / num_violators * hinges.sum()
  stderr = losses.std() / np.sqrt(n)
  assert abs(losses.mean() - expected) < 4 * stderr, (losses.mean(), expected, stderr)

  # The exact-rank reference (eq. (6) with L) against the same brute force.
  exact = warp.exact_rank_loss(s[None], jnp.asarray([POSITIVES[0]]), jnp.asarray(mask[None]),
                               Y, rank_weights)
  L_k = float(warp.rank_loss(num_violators, Y, rank_weights))
  np.testing.assert_allclose(exact[0], L_k / num_violators * hinges.sum(), rtol=1e-5)


def test_violator_count_rank_estimate_is_unbiased():
  num_violators, num_draws = 8, 30  # K < Y − |P|: every draw counts
  scores = _scores(num_violators, seed=6)
  n = 20_000
  pos = jnp.broadcast_to(jnp.asarray(POSITIVES, jnp.int32), (n, 3))
  neg = samplers.uniform_negatives(jax.random.PRNGKey(7), pos, jnp.full((n,), 3), Y, num_draws)
  s = np.asarray(scores)[np.asarray(neg)]
  est = (Y - 3) * (s > scores[POSITIVES[0]] - 1).mean(1)
  assert abs(est.mean() - num_violators) < 4 * est.std() / np.sqrt(n)
  pick = warp.find_violators(jnp.full((n,), scores[POSITIVES[0]]), jnp.asarray(s),
                             jnp.full((n,), Y - 3), Y, 'harmonic', 'violator_count')
  harmonic = np.concatenate([[0], np.cumsum(1 / np.arange(1, Y))])
  np.testing.assert_allclose(np.asarray(pick.weight_B), harmonic[np.floor(est).astype(int)], rtol=1e-5)


def test_rank_loss_tables():
  k = jnp.arange(0, 30)
  np.testing.assert_allclose(warp.rank_loss(k, 30, 'harmonic'),
                             np.concatenate([[0], np.cumsum(1 / np.arange(1, 30))]), rtol=1e-5)
  np.testing.assert_allclose(warp.rank_loss(k, 30, 'mean_rank'), np.arange(30) / 29, rtol=1e-6)
  np.testing.assert_array_equal(warp.rank_loss(k, 30, 'top1'), np.minimum(np.arange(30), 1))
  with pytest.raises(ValueError, match='rank weights'):
    warp.rank_loss(k, 30, 'bogus')


def test_uniform_negatives_avoid_positives_and_are_uniform():
  rng = np.random.default_rng(0)
  B, P, K, Yn = 64, 5, 400, 30
  pos = np.full((B, P), Yn, np.int32)
  num_pos = rng.integers(0, P + 1, B)
  for b in range(B):
    pos[b, :num_pos[b]] = np.sort(rng.choice(Yn, num_pos[b], replace=False))
  neg = np.asarray(samplers.uniform_negatives(jax.random.PRNGKey(0), jnp.asarray(pos),
                                              jnp.asarray(num_pos, jnp.int32), Yn, K))
  assert neg.min() >= 0 and neg.max() < Yn
  for b in range(B):
    allowed = np.setdiff1d(np.arange(Yn), pos[b, :num_pos[b]])
    assert np.isin(neg[b], allowed).all()
    counts = np.bincount(neg[b], minlength=Yn)[allowed]
    assert stats.chisquare(counts).pvalue > 1e-4


def test_skip_positives_gives_the_u_th_non_positive():
  """Against the slow reference: list the non-positives, take the u-th."""
  rng = np.random.default_rng(3)
  B, P, Yn = 40, 6, 25
  pos = np.full((B, P), Yn, np.int32)
  num_pos = rng.integers(0, P + 1, B)
  for b in range(B):
    pos[b, :num_pos[b]] = np.sort(rng.choice(Yn, num_pos[b], replace=False))
  u = np.stack([rng.integers(0, Yn - num_pos[b], 30) for b in range(B)]).astype(np.int32)
  got = np.asarray(samplers.skip_positives(jnp.asarray(u), jnp.asarray(pos), Yn))
  for b in range(B):
    allowed = np.setdiff1d(np.arange(Yn), pos[b, :num_pos[b]])
    np.testing.assert_array_equal(got[b], allowed[u[b]])


def test_words_below_a_span_are_the_exact_multiply_high():
  """below(w, s) = ⌊w·s / 2³²⌋, checked in 64-bit numpy; the words and floats are uniform."""
  rng = np.random.default_rng(4)
  w = rng.integers(0, 2**32, 20000, dtype=np.uint64)
  s = np.concatenate([rng.integers(1, 2**31, 19996, dtype=np.uint64),
                      np.array([1, 2, 2**31 - 1, 10**7], np.uint64)])
  got = np.asarray(samplers.below(jnp.asarray(w.astype(np.uint32)), jnp.asarray(s.astype(np.uint32))))
  np.testing.assert_array_equal(got.astype(np.uint64), (w * s) >> np.uint64(32))
  words = samplers.random_words(jax.random.PRNGKey(0), (50000,))
  np.testing.assert_array_equal(words, samplers.random_words(jax.random.PRNGKey(0), (50000,)))
  assert not np.array_equal(words, samplers.random_words(jax.random.PRNGKey(1), (50000,)))
  counts = np.bincount(np.asarray(samplers.below(words, 10)), minlength=10)
  assert stats.chisquare(counts).pvalue > 1e-4
  floats = np.asarray(samplers.unit_floats(words))
  assert floats.min() >= 0 and floats.max() < 1
  assert stats.kstest(floats, 'uniform').pvalue > 1e-4

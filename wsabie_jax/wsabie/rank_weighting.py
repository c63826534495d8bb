"""How much weight a positive pair gets for its rank: WARP's top-of-list weighting
under each way of estimating the rank (paper 000 §3.2, Remark 1).

A positive pair with k violators (negatives scoring above f_y − margin) should
weigh L(k) = Σ_{j≤k} 1/j in total (the exact-rank loss, eq. (6)), so the step
from k = 1 to k = 2 (α₂ = 1/2) is half the first (α₁ = 1): that ratio is what
puts the top of the list first. Each estimator below gives the expected total
weight E[L(r̂)·1{a violator was found}] as a function of k, exactly (float64):

  sequential     Alg. 1: i.i.d. uniform draws over the Y−1 negatives until a
                 violator, at most Y−1 trials, r̂ = ⌊(Y−1)/N⌋.
  first_violator the fixed budget (warp.find_violator): the same capped at K
                 draws; no violator among them, no update.
  violator_count r̂ = ⌊(Y−1)·v/K⌋ from the v violators among K draws.

With K ≪ Y/k a violator is rarely found, and when found N ≤ K makes r̂ ≥ (Y−1)/K
whatever k is, so the expected weight grows linearly in k: α₁/α₂ → 1, a
mean-rank loss near the top (README "What the fixed budget does to WARP").
`adaptive_weight_curve` measures paper 003's sampler with its importance
weights by simulation (it depends on the embedding).
"""
from __future__ import annotations

import numpy as np

ESTIMATORS = ('exact', 'sequential', 'first_violator', 'violator_count')


def harmonic_table(n: int) -> np.ndarray:
  """L(r) = Σ_{j≤r} 1/j for r = 0..n (L(0) = 0)."""
  return np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1))])


def expected_weight(k: int, num_labels: int, estimator: str, num_draws: int = 0) -> float:
  """E[L(r̂)·1{found}] for a positive with k ≥ 1 violators among Y − 1 negatives
  (one positive label); `num_draws` K for the fixed-budget estimators."""
  negatives = num_labels - 1
  if not 1 <= k <= negatives:
    raise ValueError(f'k = {k} violators must be in [1, {negatives}]')
  L = harmonic_table(negatives)
  if estimator == 'exact':
    return float(L[k])
  p = k / negatives
  if estimator in ('sequential', 'first_violator'):
    cap = negatives if estimator == 'sequential' else min(num_draws, negatives)
    if cap < 1:
      raise ValueError(f'{estimator} needs num_draws ≥ 1, got {num_draws}')
    n = np.arange(1, cap + 1)
    prob_n = np.exp((n - 1) * np.log1p(-p)) * p if p < 1 else (n == 1).astype(float)
    return float(np.sum(prob_n * L[negatives // n]))
  if estimator == 'violator_count':
    from scipy import stats
    draws = min(num_draws, negatives)
    v = np.arange(1, draws + 1)
    return float(np.sum(stats.binom.pmf(v, draws, p) * L[(negatives * v) // draws]))
  raise ValueError(f'estimator {estimator!r} is not one of {ESTIMATORS}')


def weight_curve(ks, num_labels: int, estimator: str, num_draws: int = 0) -> np.ndarray:
  return np.asarray([expected_weight(k, num_labels, estimator, num_draws) for k in ks])


def top_ratio(num_labels: int, estimator: str, num_draws: int = 0) -> float:
  """α₁/α₂ as the estimator realises it: w(1) / (w(2) − w(1)); 2 for exact ranks."""
  w1, w2 = weight_curve((1, 2), num_labels, estimator, num_draws)
  return float(w1 / (w2 - w1))


def adaptive_weight_curve(ks, num_labels: int, num_draws: int, rank_scale: float,
                          dim: int = 32, trials: int = 4000, seed: int = 0):
  """(mean, standard error) of L(r̂)·1{found} for paper 003's sampler with its
  importance weights (warp.importance_weight), by simulation: a random table
  W (Y×D) and image, the labels ranked by score, the top k made the violators.
  Depends on W and the image; this is one isotropic draw of them."""
  import jax
  import jax.numpy as jnp

  from wsabie_jax.wsabie import adaptive_sampler as vse
  from wsabie_jax.wsabie import warp

  rng = np.random.default_rng(seed)
  W = jnp.asarray(rng.normal(0, 1, (num_labels, dim)), jnp.float32)
  image = jnp.asarray(rng.normal(0, 1, (1, dim)), jnp.float32)
  sampler = vse.refresh(W, 0)
  order = np.argsort(-(np.asarray(image) @ np.asarray(W).T)[0])
  images = jnp.repeat(image, trials, 0)
  labels = vse.draw(sampler, images, vse.draw_uniforms(jax.random.PRNGKey(seed), trials, num_draws),
                    rank_scale)
  q = vse.proposal_prob(sampler, images, labels, rank_scale)
  means, errors = [], []
  for k in ks:
    is_violator = np.zeros(num_labels, bool)
    is_violator[order[:k]] = True
    weight, _ = warp.importance_weights(jnp.asarray(is_violator)[labels], q,
                                        jnp.full((trials,), num_labels - 1), num_labels)
    w = np.asarray(weight, np.float64)
    means.append(w.mean())
    errors.append(w.std() / np.sqrt(trials))
  return np.asarray(means), np.asarray(errors)

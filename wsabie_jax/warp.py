"""WARP (paper 000 §3, Alg. 1) in its accelerator form, with its references.

Fixed-budget parallel draws (DESIGN §1): all K candidates are drawn and scored
at once; the first violator in draw order is ȳ and its 1-based position is N.
Because draws are i.i.d., N is distributed exactly as Alg. 1's trial count
capped at K. No violator within the budget → no update (rank < (Y−1)/K).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

RANK_WEIGHTS = ('harmonic', 'mean_rank', 'top1')
RANK_ESTIMATES = ('first_violator', 'violator_count')
VIOLATORS = ('first', 'all')


def rank_loss(rank: jax.Array, num_labels: int, kind: str) -> jax.Array:
  """L(k) = Σ_{j≤k} α_j, eq. (5); L(0) = 0. Exact for real k ≥ 0 too."""
  rank = jnp.asarray(rank, jnp.float32)
  if kind == 'harmonic':  # α_j = 1/j: L(k) = H_k = ψ(k+1) + γ
    return jnp.where(rank > 0, jax.scipy.special.digamma(rank + 1.0) + jnp.euler_gamma, 0.0)
  if kind == 'mean_rank':  # α_j = 1/(Y−1)
    return rank / (num_labels - 1)
  if kind == 'top1':  # α_1 = 1, α_{j>1} = 0 (as paper 002 uses)
    return jnp.minimum(rank, 1.0)
  raise ValueError(f'rank weights {kind!r} are not one of {RANK_WEIGHTS}')


class Violators(NamedTuple):
  index_B: jax.Array     # position of ȳ among the K draws (0 when none)
  weight_B: jax.Array    # L(rank estimate), 0 when there is no violator
  num_trials_B: jax.Array  # N, Alg. 1's trial count; K+1 when none was found
  found_B: jax.Array     # bool
  violates_BxK: jax.Array  # every draw that violates the margin (within the budget)


def find_violators(pos_score_B: jax.Array, neg_scores_BxK: jax.Array,
                   num_negatives_B: jax.Array, num_labels: int,
                   rank_weights: str = 'harmonic',
                   rank_estimate: str = 'first_violator',
                   margin: float = 1.0, valid_BxK: jax.Array | None = None) -> Violators:
  """First violator of f_ȳ > f_y − margin (Alg. 1 l. 11) and its weight L(⌊(Y−1)/N⌋).

  `num_negatives_B` is Y − |positives| (Y − 1 for a single label): the size of
  the set drawn from. Alg. 1 stops after that many trials, so draws past it are
  ignored whatever the budget. `valid_BxK` masks draws that cannot violate
  (adaptive draws that hit a positive).
  """
  num_draws = neg_scores_BxK.shape[1]
  in_budget_K = jnp.arange(num_draws)[None, :] < num_negatives_B[:, None]
  violates_BxK = (neg_scores_BxK > pos_score_B[:, None] - margin) & in_budget_K
  if valid_BxK is not None:
    violates_BxK &= valid_BxK
  found_B = jnp.any(violates_BxK, axis=1)
  index_B = jnp.argmax(violates_BxK, axis=1)
  num_trials_B = jnp.where(found_B, index_B + 1, num_draws + 1)
  num_neg_B = num_negatives_B.astype(jnp.float32)
  if rank_estimate == 'first_violator':  # rank ≈ ⌊(Y−1)/N⌋, §3
    rank_B = jnp.floor(num_neg_B / num_trials_B)
  elif rank_estimate == 'violator_count':  # rank ≈ (Y−1)·v/K, uses every draw
    budget_B = jnp.minimum(num_draws, num_neg_B)
    rank_B = jnp.floor(num_neg_B * jnp.sum(violates_BxK, axis=1) / budget_B)
  else:
    raise ValueError(f'rank estimate {rank_estimate!r} is not one of {RANK_ESTIMATES}')
  weight_B = jnp.where(found_B, rank_loss(rank_B, num_labels, rank_weights), 0.0)
  return Violators(index_B, weight_B, num_trials_B, found_B, violates_BxK)


def importance_weights(violates_BxK: jax.Array, proposal_BxK: jax.Array,
                       num_negatives_B: jax.Array, num_labels: int,
                       rank_weights: str = 'harmonic'):
  """WARP weighting for draws from a non-uniform proposal q (the adaptive sampler).

  The rank (the number of violating negatives) is estimated by importance
  sampling, r̂ = ⌊(1/K)·Σ_k viol_k / q_k⌋ — unbiased before the floor, and with
  q uniform on the Y−|P| negatives exactly the violator-count estimate. Each
  violator then carries L(r̂)·(1/q_k) / Σ_j viol_j/q_j: eq. (6)'s L(rank)/rank
  per violator, its sum over violators estimated the same way.
  Returns (L(r̂) per image, weight per draw); both 0 without a violator.
  """
  inv_q_BxK = jnp.where(violates_BxK, 1.0 / jnp.maximum(proposal_BxK, 1e-30), 0.0)
  total_B = jnp.sum(inv_q_BxK, axis=1)
  rank_B = jnp.minimum(jnp.floor(total_B / violates_BxK.shape[1]),
                       num_negatives_B.astype(jnp.float32))
  weight_B = rank_loss(rank_B, num_labels, rank_weights)
  return weight_B, weight_B[:, None] * inv_q_BxK / jnp.maximum(total_B, 1e-30)[:, None]


def hinge(pos_score_B: jax.Array, neg_score_B: jax.Array, margin: float = 1.0) -> jax.Array:
  """|margin − f_y(x) + f_ȳ(x)|₊, the pairwise term of eqs. (6) and (9)."""
  return jax.nn.relu(margin - pos_score_B + neg_score_B)


def exact_rank_loss(scores_BxY: jax.Array, label_B: jax.Array, pos_mask_BxY: jax.Array,
                    num_labels: int, rank_weights: str = 'harmonic',
                    margin: float = 1.0) -> jax.Array:
  """OWPC-SGD reference, eq. (6) with the exact margin-penalised rank (7).

  Scores every label: O(Y·D) per example, for tests and ablations only.
  """
  pos_score_B = jnp.take_along_axis(scores_BxY, label_B[:, None], 1)[:, 0]
  hinge_BxY = jnp.where(pos_mask_BxY, 0.0, hinge(pos_score_B[:, None], scores_BxY, margin))
  rank_B = jax.lax.stop_gradient(jnp.sum(hinge_BxY > 0, axis=1))
  weight_B = rank_loss(rank_B, num_labels, rank_weights) / jnp.maximum(rank_B, 1)
  return weight_B * jnp.sum(hinge_BxY, axis=1)

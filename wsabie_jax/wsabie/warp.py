"""WARP (paper 000 §3, Alg. 1) in its accelerator form, with its references.

Fixed-budget parallel draws (docs/DESIGN.md §2): all K candidates are drawn and scored
at once; the first violator in draw order is ȳ and its 1-based position is N.
Because draws are i.i.d., N is distributed exactly as Alg. 1's trial count
capped at K. No violator within the budget → no update (rank < (Y−1)/K).
"""
from __future__ import annotations

import functools
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


def violates(pos_score: jax.Array, neg_score: jax.Array, margin: float) -> jax.Array:
  """Alg. 1 l. 11's test f_ȳ > f_y − margin; with margin 0 paper 001's
  f_ȳ ≥ f_y (a tie counts, as in its rank, eq. (2))."""
  return jnp.where(margin > 0, neg_score > pos_score - margin, neg_score >= pos_score)


class Violators(NamedTuple):
  index_B: jax.Array     # position of ȳ among the K draws (0 when none)
  weight_B: jax.Array    # L(rank estimate), 0 when there is no violator
  num_trials_B: jax.Array  # N, Alg. 1's trial count; K+1 when none was found
  found_B: jax.Array     # bool
  violates_BxK: jax.Array  # every draw that violates the margin (within the budget)


def first_true(mask_K: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(any, the first True's position or 0 when none) along the last axis: as
  jnp.any and jnp.argmax, but one min-reduce, which XLA:CPU vectorizes where
  argmax's (value, index) reduce runs element by element."""
  K = mask_K.shape[-1]
  first = jnp.min(jnp.where(mask_K, jnp.arange(K, dtype=jnp.int32), K), axis=-1)
  found = first < K
  return found, jnp.where(found, first, 0)


def find_violator(pos_score: jax.Array, neg_scores_K: jax.Array, num_negatives: jax.Array,
                  valid_K: jax.Array | None, *, num_labels: int, rank_weights: str = 'harmonic',
                  rank_estimate: str = 'first_violator', margin: float = 1.0,
                  min_negatives: int = 0) -> Violators:
  """Alg. 1 ll. 6–14 for one positive pair, its K draws made at once.

  ȳ is the first draw that `violates` (l. 11), N its 1-based position among
  the valid draws, and its weight L(⌊(Y−1)/N⌋) (§3). `num_negatives` is
  Y − |positives|, the size of the set drawn from: Alg. 1 stops after that
  many trials, so draws past it are ignored whatever the budget. `valid_K`
  (None: all) masks draws that are no trial (a draw that hit a positive: adaptive draws,
  draws shared by a batch's rows); the valid ones are i.i.d. over the
  negatives, so N and the violator count are taken over them alone. Fields
  are scalars here. `min_negatives` (static): no pair has fewer negatives; when
  the K draws cannot outnumber them the cap never binds, and the trials are
  counted by masked sums instead of a running count (a slow scan on the CPU).
  """
  num_draws = neg_scores_K.shape[0]
  if valid_K is None:  # every draw a trial (uniform over the negatives): the cheapest count
    violates_K = violates(pos_score, neg_scores_K, margin) & (jnp.arange(num_draws) < num_negatives)
    found, index = first_true(violates_K)
    num_trials = jnp.where(found, index + 1, num_draws + 1)
    trials = jnp.minimum(num_draws, num_negatives)
  elif num_draws <= min_negatives:
    violates_K = violates(pos_score, neg_scores_K, margin) & valid_K
    found, index = first_true(violates_K)
    skipped = jnp.sum(~valid_K & (jnp.arange(num_draws) < index))  # hits before ȳ
    num_trials = jnp.where(found, index + 1 - skipped, num_draws + 1)
    trials = jnp.sum(valid_K)
  else:
    trial_K = jnp.cumsum(valid_K, dtype=jnp.int32)  # a valid draw's 1-based trial number
    violates_K = violates(pos_score, neg_scores_K, margin) & (trial_K <= num_negatives) & valid_K
    found, index = first_true(violates_K)
    num_trials = jnp.where(found, trial_K[index], num_draws + 1)
    trials = jnp.minimum(trial_K[-1], num_negatives)
  num_neg = num_negatives.astype(jnp.float32)
  if rank_estimate == 'first_violator':  # rank ≈ ⌊(Y−1)/N⌋, §3
    rank = jnp.floor(num_neg / num_trials)
  elif rank_estimate == 'violator_count':  # rank ≈ (Y−1)·v/K, K the trials made
    rank = jnp.floor(num_neg * jnp.sum(violates_K) / jnp.maximum(trials.astype(jnp.float32), 1.0))
  else:
    raise ValueError(f'rank estimate {rank_estimate!r} is not one of {RANK_ESTIMATES}')
  weight = jnp.where(found, rank_loss(rank, num_labels, rank_weights), 0.0)
  return Violators(index, weight, num_trials, found, violates_K)


def find_violators(pos_score_B: jax.Array, neg_scores_BxK: jax.Array,
                   num_negatives_B: jax.Array, num_labels: int,
                   rank_weights: str = 'harmonic',
                   rank_estimate: str = 'first_violator',
                   margin: float = 1.0, valid_BxK: jax.Array | None = None,
                   min_negatives: int = 0) -> Violators:
  """`find_violator` over a batch of B positive pairs (vmapped)."""
  one = functools.partial(find_violator, num_labels=num_labels, rank_weights=rank_weights,
                          rank_estimate=rank_estimate, margin=margin, min_negatives=min_negatives)
  return jax.vmap(one)(pos_score_B, neg_scores_BxK, num_negatives_B, valid_BxK)


def importance_weight(violates_K: jax.Array, proposal_K: jax.Array, num_negatives: jax.Array,
                      *, num_labels: int, rank_weights: str = 'harmonic'):
  """WARP weighting of one pair's K draws from a non-uniform proposal q (VSE-ens).

  The rank (the number of violating negatives) is estimated by importance
  sampling, r̂ = ⌊(1/K)·Σ_k viol_k / q_k⌋ (K: the draws that count, at most
  Y−|P|) — unbiased before the floor, clipped to Y−|P|, and with
  q uniform on the Y−|P| negatives exactly the violator-count estimate. Each
  violator then carries L(r̂)·(1/q_k) / Σ_j viol_j/q_j: eq. (6)'s L(rank)/rank
  per violator, its sum over violators estimated the same way.
  Returns (L(r̂), weight per draw); both 0 without a violator.
  """
  inv_q_K = jnp.where(violates_K, 1.0 / jnp.maximum(proposal_K, 1e-30), 0.0)
  total = jnp.sum(inv_q_K)
  # The mean over the draws that count: draws past Y−|P| never do (find_violator),
  # so a budget K > Y−|P| averages over Y−|P| of them, as the violator count does.
  num_neg = num_negatives.astype(jnp.float32)
  counted = jnp.minimum(jnp.float32(violates_K.shape[0]), num_neg)
  rank = jnp.minimum(jnp.floor(total / counted), num_neg)
  weight = rank_loss(rank, num_labels, rank_weights)
  return weight, weight * inv_q_K / jnp.maximum(total, 1e-30)


def importance_weights(violates_BxK: jax.Array, proposal_BxK: jax.Array,
                       num_negatives_B: jax.Array, num_labels: int,
                       rank_weights: str = 'harmonic'):
  """`importance_weight` over a batch (vmapped): (L(r̂)_B, weight per draw B×K)."""
  one = functools.partial(importance_weight, num_labels=num_labels, rank_weights=rank_weights)
  return jax.vmap(one)(violates_BxK, proposal_BxK, num_negatives_B)


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

"""The rank-invariant adaptive negative sampler of VSE-ens (paper 003, Alg. 1).

Instead of drawing labels uniformly and scoring them until one violates,
draw labels that are likely to rank high for the image directly:

  r ~ truncated geometric with mean ≈ λ·Y        (Alg. 1 l. 12, eq. (6))
  f ~ p(f|i) ∝ |v_if|·σ_f                         (l. 13, eq. (8))
  ȳ = the label at position r of factor f's list, counted from the top when
      v_if > 0 and from the bottom otherwise      (ll. 14–18, eq. (10))

The per-factor lists r⁻¹(·|f) and σ_f, μ_f (eq. (9)) are a snapshot of W,
refreshed every |Y|·log|Y| iterations (l. 4); between refreshes a draw costs O(D).
λ is relative to Y, so one setting works for any vocabulary (the paper tunes
an absolute λ per data set).

Draws are a deterministic function of uniforms (`draw_uniforms`), so a data
parallel step can make the global batch's uniforms and slice them.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import functools

import jax
import jax.numpy as jnp

from wsabie_jax.core import precision, samplers


class SamplerState(NamedTuple):
  order_DxY: jax.Array     # int32: labels by W[:, f], largest first (r⁻¹(·|f))
  position_YxD: jax.Array  # int32: position of label y in order_DxY[f] (rows gathered per draw)
  mean_D: jax.Array        # μ_f, eq. (9)
  std_D: jax.Array         # σ_f, eq. (9)
  refreshed_at: jax.Array  # int32: the step of this snapshot


def refresh(W_YxD: jax.Array, step: jax.Array) -> SamplerState:
  """Alg. 1 ll. 6–9: sort the labels by each factor, and μ_f, σ_f. O(D·Y·log Y)."""
  W_DxY = W_YxD.T
  order_DxY = jnp.argsort(-W_DxY, axis=1).astype(jnp.int32)
  factors_DxY = jnp.broadcast_to(jnp.arange(W_DxY.shape[0])[:, None], W_DxY.shape)
  positions_DxY = jnp.broadcast_to(jnp.arange(W_DxY.shape[1], dtype=jnp.int32), W_DxY.shape)
  position_YxD = jnp.zeros_like(W_YxD, jnp.int32).at[order_DxY, factors_DxY].set(positions_DxY)
  return SamplerState(order_DxY, position_YxD, jnp.mean(W_DxY, axis=1), jnp.std(W_DxY, axis=1),
                      jnp.asarray(step, jnp.int32))


def refresh_interval_steps(num_labels: int, pairs_per_step: int, every_pairs: int = 0) -> int:
  """Steps between refreshes: every |Y|·ln|Y| iterations by default (Alg. 1 l. 4).

  Alg. 1's counter q advances once per iteration — one positive pair, one
  negative, one SGD update — so a step of B pairs advances it by B, whatever
  the number of candidate draws per pair.
  """
  every_pairs = every_pairs or num_labels * math.log(max(num_labels, 2))
  return min(max(1, round(every_pairs / pairs_per_step)), 2**31 - 1)


def maybe_refresh(sampler: SamplerState, W_YxD: jax.Array, step: jax.Array,
                  interval_steps: int) -> SamplerState:
  """A fresh snapshot once `interval_steps` steps have passed since the last."""
  due = step - sampler.refreshed_at >= interval_steps
  return jax.lax.cond(due, lambda: refresh(W_YxD, step), lambda: sampler)


@precision.full_float32
def normalized_scores(image_BxD: jax.Array, W_YxD: jax.Array, sampler: SamplerState) -> jax.Array:
  """s*_i(a) = Σ_f p(f|i)·sgn(v_if)·v*_af, eq. (7), with p(f|i) = |v_if|·σ_f and
  v*_af = (v_af − μ_f)/σ_f. Equals s_i(a) minus a term that does not depend on a,
  so it ranks labels as the dot product does (the paper's rank invariance)."""
  standardized_YxD = (W_YxD - sampler.mean_D) / sampler.std_D
  return (image_BxD * sampler.std_D) @ standardized_YxD.T


def factor_probs(image_xD: jax.Array, sampler: SamplerState) -> jax.Array:
  """p(f|i) ∝ |v_if|·σ_f, eq. (8), normalised over f (the last axis)."""
  weight_xD = jnp.abs(image_xD) * sampler.std_D
  total = jnp.sum(weight_xD, axis=-1, keepdims=True)
  uniform = jnp.full_like(weight_xD, 1.0 / weight_xD.shape[-1])
  return jnp.where(total > 0, weight_xD / jnp.where(total > 0, total, 1.0), uniform)


def _log_rank_prob(rank: jax.Array, num_labels: int, scale: float) -> jax.Array:
  """log P(r) for the geometric law P(r) ∝ exp(−r/s) on r ∈ {0, …, Y−1}."""
  return (-rank / scale + jnp.log(-jnp.expm1(-1.0 / scale))
          - jnp.log(-jnp.expm1(-num_labels / scale)))


def draw_uniforms(key: jax.Array, batch_size: int, num_draws: int) -> jax.Array:
  """The randomness of B·K draws: [..., 0] picks the rank, [..., 1] the factor."""
  return samplers.unit_floats(samplers.random_words(key, (batch_size, num_draws, 2)))


def draw_one(sampler: SamplerState, image_D: jax.Array, u_Kx2: jax.Array,
             rank_scale: float) -> jax.Array:
  """Alg. 1 ll. 12–18 for one image, K draws from their uniforms: labels (K,)."""
  num_labels = sampler.order_DxY.shape[1]
  scale = rank_scale * num_labels
  # l. 12: inverse CDF of the truncated exponential, floored: exactly the geometric P(r).
  rank_K = jnp.floor(-scale * jnp.log1p(u_Kx2[:, 0] * jnp.expm1(-num_labels / scale)))
  rank_K = jnp.clip(rank_K, 0, num_labels - 1).astype(jnp.int32)
  # l. 13: a factor f ~ p(f|i), eq. (8).
  cdf_D = jnp.cumsum(factor_probs(image_D, sampler))
  factor_K = jnp.minimum(jnp.searchsorted(cdf_D, u_Kx2[:, 1] * cdf_D[-1]), image_D.shape[0] - 1)
  # ll. 14–18: from the top of f's list when v_if > 0, else from the bottom.
  position_K = jnp.where(image_D[factor_K] > 0, rank_K, num_labels - 1 - rank_K)
  return sampler.order_DxY[factor_K, position_K]


@functools.partial(jax.jit, static_argnames='rank_scale')  # one program outside a step
def draw(sampler: SamplerState, image_BxD: jax.Array, u_BxKx2: jax.Array,
         rank_scale: float) -> jax.Array:
  """`draw_one` for B images (vmapped): labels (B, K)."""
  return jax.vmap(lambda x, u: draw_one(sampler, x, u, rank_scale))(image_BxD, u_BxKx2)


def proposal_prob(sampler: SamplerState, image_BxD: jax.Array, labels_BxK: jax.Array,
                  rank_scale: float) -> jax.Array:
  """q(ȳ|i) = Σ_f p(f|i)·P(rank of ȳ in f's list, from the side sgn(v_if) picks).

  The probability that `draw` returns the label: O(K·D) per image, the cost of
  scoring the draws. WARP weighting with adaptive draws needs it.
  """
  num_labels = sampler.order_DxY.shape[1]
  position_BxKxD = sampler.position_YxD[labels_BxK]
  positive_Bx1xD = (image_BxD > 0)[:, None, :]
  rank_BxKxD = jnp.where(positive_Bx1xD, position_BxKxD, num_labels - 1 - position_BxKxD)
  rank_prob_BxKxD = jnp.exp(_log_rank_prob(rank_BxKxD.astype(jnp.float32), num_labels,
                                           rank_scale * num_labels))
  return jnp.sum(factor_probs(image_BxD, sampler)[:, None, :] * rank_prob_BxKxD, axis=2)


"""OWPC-SGD's exact-rank loss (paper 000 eq. (6) with the rank (7)) over label chunks.

Every label is scored, so a step costs O(B·Y·D) — one matmul, cheap on an
accelerator up to Y ≈ 10⁵–10⁶ — but memory stays O(B·C) for C labels a chunk,
never B×Y. Two passes over the chunks (each a `lax.scan`):

  1. the exact margin-penalised rank r_b = #{ȳ ∉ P_b : f_ȳ > f_y − margin};
  2. with the weights w_b = L(r_b)/r_b fixed (as the rank is a count, not
     differentiated), each chunk's Σ_b w_b Σ_ȳ |margin − f_y + f_ȳ|₊ is
     differentiated on its own (`jax.vjp`) and its label rows' gradients kept.

It gives what `warp.exact_rank_loss` gives on the full B×Y matrix
(tests/exact_rank_test.py) and keeps Remark 1's top-of-list weighting exactly,
which a fixed budget K ≪ Y does not (README "What the fixed budget does").
Where one chunk holds every label (Y ≤ label_chunk, dot scores) the step
reads the labels whole instead (tables.exact_label_grads: one B×Y matmul,
the slopes by two more).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from wsabie_jax.core import model, samplers
from wsabie_jax.wsabie import warp


def _chunks(W_YxD: jax.Array, chunk: int):
  """W padded to whole chunks: (C-row blocks, their label ids, which are real)."""
  Y, D = W_YxD.shape
  num_chunks = -(-Y // chunk)
  ids_NxC = jnp.arange(num_chunks * chunk).reshape(num_chunks, chunk)
  W_NxCxD = jnp.pad(W_YxD, ((0, num_chunks * chunk - Y), (0, 0))).reshape(num_chunks, chunk, D)
  return W_NxCxD, ids_NxC, ids_NxC < Y


def row_grads(image_BxD: jax.Array, W_YxD: jax.Array, label_B: jax.Array, pos_BxP: jax.Array,
              weight_B: jax.Array, *, score: str, rank_weights: str, margin: float,
              chunk: int):
  """(loss, ∂/∂image B×D, ∂/∂W Y×D, each pair's rank B) of Σ_b weight_b ·
  eq. (6) for pair (x_b, y_b), the rank its count of violators.

  `pos_BxP` are the image's positives (padded with Y): never counted as
  violators. The positive row's gradient is folded into ∂/∂W.
  """
  Y = W_YxD.shape[0]
  W_pos_BxD = W_YxD[label_B]
  W_NxCxD, ids_NxC, real_NxC = _chunks(W_YxD, chunk)

  def hinges(image_BxD, W_pos_BxD, W_CxD, ids_C, real_C):
    pos_score_B = model.score(image_BxD, W_pos_BxD[:, None], score)[:, 0]
    s_BxC = model.score_all(image_BxD, W_CxD, score)
    negative_BxC = real_C[None, :] & ~samplers.is_positive(jnp.broadcast_to(ids_C, s_BxC.shape), pos_BxP)
    return jnp.where(negative_BxC, warp.hinge(pos_score_B[:, None], s_BxC, margin), 0.0)

  def count(rank_B, xs):
    return rank_B + jnp.sum(hinges(image_BxD, W_pos_BxD, *xs) > 0, axis=1), None

  rank_B, _ = jax.lax.scan(count, jnp.zeros(label_B.shape, jnp.int32), (W_NxCxD, ids_NxC, real_NxC))
  w_B = weight_B * warp.rank_loss(rank_B, Y, rank_weights) / jnp.maximum(rank_B, 1)

  def differentiate(carry, xs):
    loss, g_image, g_pos = carry
    W_CxD, ids_C, real_C = xs
    chunk_loss = lambda x, wp, wc: jnp.sum(w_B[:, None] * hinges(x, wp, wc, ids_C, real_C))
    value, vjp = jax.vjp(chunk_loss, image_BxD, W_pos_BxD, W_CxD)
    dx, dpos, dW_CxD = vjp(jnp.ones_like(value))
    return (loss + value, g_image + dx, g_pos + dpos), dW_CxD

  zeros = (jnp.zeros(()), jnp.zeros_like(image_BxD), jnp.zeros_like(W_pos_BxD))
  (loss, g_image, g_pos), dW_NxCxD = jax.lax.scan(differentiate, zeros, (W_NxCxD, ids_NxC, real_NxC))
  g_W = dW_NxCxD.reshape(-1, W_YxD.shape[1])[:Y].at[label_B].add(g_pos)
  return loss, g_image, g_W, rank_B

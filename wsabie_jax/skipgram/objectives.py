"""The image–word objectives of paper 004: sampled skip-gram (eq. (1)) and Fast0Tag (eq. (5)).

Each returns a loss per image to minimise (the papers write likelihoods to
maximise; here their negatives). The sampled forms read only the P + N word
rows they drew, O(B·(P+N)·D) (with Fast0Tag's P·N pairs formed from the same
dot products); the full forms score every training tag, O(B·Y·D): the
"traditional optimization" that paper 004 Table 1 times them against.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

LOSSES = ('xent', 'fast0tag')


def sampled_xent_one(image_D: jax.Array, v_pos_PxD: jax.Array, v_neg_NxD: jax.Array,
                     pos_ids_P: jax.Array, neg_ok_N: jax.Array, alpha: float) -> jax.Array:
  """−eq. (1) for one image: Σ_p log σ(f·v_p) + Σ_n log σ(−f·v_n)
  + α(Σ_{p,p'} σ(v_p·v_p') + Σ_{p,n} σ(−v_p·v_n)).

  The P positives are tags drawn with replacement, so two of them can be the
  same tag: the co-occurrence sum runs over ordered pairs of *different* tags
  (a tag is not its own co-occurrence). A negative that is one of the image's
  tags (neg_ok false) contributes nothing.
  """
  pos_P = v_pos_PxD @ image_D
  neg_N = v_neg_NxD @ image_D
  likelihood = (jnp.sum(jax.nn.log_sigmoid(pos_P))
                + jnp.sum(jnp.where(neg_ok_N, jax.nn.log_sigmoid(-neg_N), 0.0)))
  if alpha:
    other_PxP = pos_ids_P[:, None] != pos_ids_P[None, :]
    likelihood += alpha * (
        jnp.sum(jnp.where(other_PxP, jax.nn.sigmoid(v_pos_PxD @ v_pos_PxD.T), 0.0))
        + jnp.sum(jnp.where(neg_ok_N[None, :], jax.nn.sigmoid(-(v_pos_PxD @ v_neg_NxD.T)), 0.0)))
  return -likelihood


def sampled_fast0tag_one(image_D: jax.Array, v_pos_PxD: jax.Array, v_neg_NxD: jax.Array,
                         neg_ok_N: jax.Array, beta: float) -> jax.Array:
  """−eq. (5) for one image over its drawn pairs: −β Σ_p Σ_n log σ(f·(v_p − v_n)), O(P·N)."""
  pair_PxN = jax.nn.log_sigmoid((v_pos_PxD @ image_D)[:, None] - (v_neg_NxD @ image_D)[None, :])
  return -beta * jnp.sum(jnp.where(neg_ok_N[None, :], pair_PxN, 0.0))


def sampled_xent(image_BxD, v_pos_BxPxD, v_neg_BxNxD, pos_ids_BxP, neg_ok_BxN,
                 alpha: float) -> jax.Array:
  """`sampled_xent_one` over a batch (vmapped): a loss per image."""
  return jax.vmap(lambda *a: sampled_xent_one(*a, alpha))(
      image_BxD, v_pos_BxPxD, v_neg_BxNxD, pos_ids_BxP, neg_ok_BxN)


def sampled_fast0tag(image_BxD, v_pos_BxPxD, v_neg_BxNxD, neg_ok_BxN, beta: float) -> jax.Array:
  """`sampled_fast0tag_one` over a batch (vmapped): a loss per image."""
  return jax.vmap(lambda *a: sampled_fast0tag_one(*a, beta))(
      image_BxD, v_pos_BxPxD, v_neg_BxNxD, neg_ok_BxN)


def tag_mask(pos_BxT: jax.Array, num_tags: int) -> jax.Array:
  """B×Y booleans: the image's tags (ids outside [0, Y) are padding)."""
  rows_Bx1 = jnp.arange(pos_BxT.shape[0])[:, None]
  return jnp.zeros((pos_BxT.shape[0], num_tags), bool).at[rows_Bx1, pos_BxT].set(True, mode='drop')


def full_xent(image_BxD: jax.Array, W_YxD: jax.Array, pos_BxT: jax.Array,
              alpha: float) -> jax.Array:
  """−eq. (1) without sampling: every tag of the image against every other tag.

  Σ_{t∈T} log σ(f·v_t) + Σ_{n∉T} log σ(−f·v_n) + α(Σ_{t≠t'∈T} σ(v_t·v_t') + Σ_{t∈T,n∉T} σ(−v_t·v_n)):
  multi-label sigmoid cross-entropy over all Y tags, plus the co-occurrence terms.
  """
  num_tags = W_YxD.shape[0]
  is_tag_BxY = tag_mask(pos_BxT, num_tags)
  s_BxY = image_BxD @ W_YxD.T
  likelihood_B = jnp.sum(jnp.where(is_tag_BxY, jax.nn.log_sigmoid(s_BxY),
                                   jax.nn.log_sigmoid(-s_BxY)), 1)
  if alpha:
    real_BxT = (pos_BxT >= 0) & (pos_BxT < num_tags)
    v_pos_BxTxD = W_YxD[jnp.clip(pos_BxT, 0, num_tags - 1)]
    pp_BxTxT = jnp.einsum('btd,bud->btu', v_pos_BxTxD, v_pos_BxTxD)
    T = pos_BxT.shape[1]
    pair_BxTxT = real_BxT[:, :, None] & real_BxT[:, None, :] & ~jnp.eye(T, dtype=bool)
    pn_BxTxY = jnp.einsum('btd,yd->bty', v_pos_BxTxD, W_YxD)
    neg_BxTxY = real_BxT[:, :, None] & ~is_tag_BxY[:, None, :]
    likelihood_B += alpha * (jnp.sum(jnp.where(pair_BxTxT, jax.nn.sigmoid(pp_BxTxT), 0.0), (1, 2))
                             + jnp.sum(jnp.where(neg_BxTxY, jax.nn.sigmoid(-pn_BxTxY), 0.0), (1, 2)))
  return -likelihood_B


def full_fast0tag(image_BxD: jax.Array, W_YxD: jax.Array, pos_BxT: jax.Array,
                  beta: float) -> jax.Array:
  """−eq. (5) over all pairs (t ∈ T, n ∉ T): Fast0Tag's own RankNet loss, O(T·Y)."""
  num_tags = W_YxD.shape[0]
  is_tag_BxY = tag_mask(pos_BxT, num_tags)
  s_BxY = image_BxD @ W_YxD.T
  real_BxT = (pos_BxT >= 0) & (pos_BxT < num_tags)
  s_pos_BxT = jnp.take_along_axis(s_BxY, jnp.clip(pos_BxT, 0, num_tags - 1), 1)
  pair_BxTxY = jax.nn.log_sigmoid(s_pos_BxT[:, :, None] - s_BxY[:, None, :])
  keep_BxTxY = real_BxT[:, :, None] & ~is_tag_BxY[:, None, :]
  return -beta * jnp.sum(jnp.where(keep_BxTxY, pair_BxTxY, 0.0), (1, 2))

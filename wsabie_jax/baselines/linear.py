"""Paper 000 §6.3's linear baselines, f_i(x) = w_i·x, trained with Passive-Aggressive.

One-vs-Rest: one binary large-margin classifier per label, PA-I updates
(Crammer et al. 2006): for each image and every label i, y_i = ±1,
ℓ_i = |1 − y_i w_i·x|₊, τ_i = min(C, ℓ_i / ‖x‖²), w_i += τ_i y_i x.
PAMIR-IA: the same linear model trained on the margin ranking loss
|1 − w_y·x + w_ȳ·x|₊ for a positive y and a uniform negative ȳ (PAMIR,
Grangier & Bengio 2008, applied to annotation): τ = min(C, ℓ / 2‖x‖²),
w_y += τx, w_ȳ −= τx.

Both are online algorithms, so examples are visited one at a time in a
`lax.scan`; W is stored d×Y so an update touches only the image's non-zero
rows (O(nnz·Y) for One-vs-Rest, O(nnz) for PAMIR-IA).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import samplers
from wsabie_jax.data.batching import pad_images
from wsabie_jax.data.dataset import SparseDataset


@functools.partial(jax.jit, static_argnames=('num_labels',), donate_argnums=0)
def _one_vs_rest_epoch(W_dxY, feat_idx_NxF, feat_val_NxF, pos_NxP, C, *, num_labels):
  def visit(W, example):
    idx_F, val_F, pos_P = example
    rows_FxY = W[idx_F]
    y_Y = jnp.where(jnp.zeros(num_labels + 1, bool).at[pos_P].set(True)[:num_labels], 1.0, -1.0)
    loss_Y = jnp.maximum(0.0, 1.0 - y_Y * (val_F @ rows_FxY))
    tau_Y = jnp.minimum(C, loss_Y / jnp.maximum(jnp.sum(val_F ** 2), 1e-12))
    return W.at[idx_F].add(val_F[:, None] * (tau_Y * y_Y)[None, :]), None

  W_dxY, _ = jax.lax.scan(visit, W_dxY, (feat_idx_NxF, feat_val_NxF, pos_NxP))
  return W_dxY


@functools.partial(jax.jit, donate_argnums=0)
def _pamir_epoch(W_dxY, feat_idx_NxF, feat_val_NxF, label_N, neg_N, C):
  def visit(W, example):
    idx_F, val_F, y, y_bar = example
    margin = val_F @ (W[idx_F, y] - W[idx_F, y_bar])
    loss = jnp.maximum(0.0, 1.0 - margin)
    tau = jnp.minimum(C, loss / jnp.maximum(2 * jnp.sum(val_F ** 2), 1e-12))
    W = W.at[idx_F, y].add(tau * val_F)
    return W.at[idx_F, y_bar].add(-tau * val_F), None

  W_dxY, _ = jax.lax.scan(visit, W_dxY, (feat_idx_NxF, feat_val_NxF, label_N, neg_N))
  return W_dxY


def train_linear(train: SparseDataset, kind: str, C: float = 1.0, epochs: int = 5,
                 seed: int = 0) -> jax.Array:
  """W (d×Y) of One-vs-Rest ('ovr') or PAMIR-IA ('pamir'), examples in a fresh order per epoch."""
  padded = pad_images(train)
  Y = train.num_labels
  W = jnp.zeros((train.num_features, Y), jnp.float32)
  rng = np.random.default_rng(seed)
  for epoch in range(epochs):
    if kind == 'ovr':
      order = rng.permutation(train.num_images)
      W = _one_vs_rest_epoch(W, padded.feat_idx_nxF[order], padded.feat_val_nxF[order],
                             padded.pos_nxP[order], C, num_labels=Y)
    elif kind == 'pamir':
      pair_image = np.repeat(np.arange(train.num_images), np.diff(train.label_indptr))
      order = rng.permutation(len(pair_image))
      img = pair_image[order]
      neg = samplers.uniform_negatives(jax.random.PRNGKey(seed * 1000 + epoch),
                                       jnp.asarray(padded.pos_nxP[img]),
                                       jnp.asarray(padded.num_pos_n[img]), Y, 1)[:, 0]
      W = _pamir_epoch(W, padded.feat_idx_nxF[img], padded.feat_val_nxF[img],
                       jnp.asarray(train.label_idx[order]), neg, C)
    else:
      raise ValueError(f"baseline kind {kind!r} is not 'ovr' or 'pamir'")
  return W


def linear_scores(W_dxY: jax.Array):
  """score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y for evaluation.evaluate_ranking."""
  return jax.jit(lambda idx, val: jnp.einsum('bf,bfy->by', val, W_dxY[idx]))

"""The WSABIE joint embedding (paper 000 §2; paper 001 for the distance score).

An image x ∈ R^d (a sparse bag of visual words) maps to `V x`, V: d×D; a label
i maps to its row W_i, W: Y×D. Both tables keep their rows inside the ball of
radius C (eqs. (2)–(3)). Everything here works on *gathered rows* so that a
training step never touches more than the rows a batch uses (docs/DESIGN.md §1).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import row_scatter

SCORES = ('dot', 'neg_euclidean', 'neg_sq_euclidean')


class Params(NamedTuple):
  V_dxD: jax.Array  # image feature embeddings, one row per visual word
  W_YxD: jax.Array  # label embeddings, one row per label


def project_rows(rows_NxD: jax.Array, max_norm: float) -> jax.Array:
  """Rescales rows with ‖row‖ > C back onto the ball (eqs. (2)–(3))."""
  norms_N = jnp.linalg.norm(rows_NxD, axis=-1, keepdims=True)
  return rows_NxD * jnp.minimum(1.0, max_norm / jnp.maximum(norms_N, 1e-12))


def init_params(key: jax.Array, num_features: int, num_labels: int,
                dim: int, max_norm: float, std: float = 0.0) -> Params:
  """N(0, std²) init, std = 1/√d unless given (paper 000 §3, "Training"; paper
  003 uses 0.01), rescaled into the ball."""
  key_v, key_w = jax.random.split(key)
  # Under jit (a run's init is one program) 1/√d is rounded here, once, and
  # the draws, their scaling and the projection stay apart (barriers): folded
  # or fused by XLA they would round otherwise, by up to an ulp, than the same
  # ops run one by one (tests/compiles_test.py pins them equal).
  std = std or float(np.float32(1) / np.sqrt(np.float32(num_features)))
  apart = jax.lax.optimization_barrier
  V, W = apart((jax.random.normal(key_v, (num_features, dim), jnp.float32),
                jax.random.normal(key_w, (num_labels, dim), jnp.float32)))
  V, W = apart((std * V, std * W))
  return Params(project_rows(V, max_norm), project_rows(W, max_norm))


def embed_images(V_rows_BxFxD: jax.Array, feat_val_BxF: jax.Array) -> jax.Array:
  """Φ_I(x) = V x from the gathered rows of x's non-zeros (padding has value 0)."""
  return jnp.einsum('bfd,bf->bd', V_rows_BxFxD, feat_val_BxF)


def embed_packed(V_dxD: jax.Array, batch, batch_size: int) -> tuple[jax.Array, jax.Array]:
  """Φ_I(x) = V x for a packed batching.PairBatch (data/packing.py): (images_BxD, row_N),
  a sorted segment sum over the batch's real non-zeros (padding adds 0)."""
  row_N = packed_rows(batch, batch_size)
  return (segment_embed(V_dxD, batch.feat_idx_SxN.reshape(-1), batch.feat_val_SxN.reshape(-1),
                        row_N, batch_size), row_N)


def segment_embed(V_dxD: jax.Array, idx_N: jax.Array, val_N: jax.Array, row_N: jax.Array,
                  num_rows: int) -> jax.Array:
  """Σ of val_n·V[idx_n] per row row_N (non-decreasing): num_rows×D, in
  cache-sized chunks on CPU (core/row_scatter.py)."""
  return row_scatter.add_scaled_rows(jnp.zeros((num_rows, V_dxD.shape[1]), V_dxD.dtype), row_N,
                                     val_N, V_dxD, idx_N, at_sorted=True)


def packed_rows(batch, batch_size: int) -> jax.Array:
  """The batch row (0..B−1) of each of a packed batch's N = S·slots non-zeros."""
  row_SxN = batch.feat_row_SxN
  S = row_SxN.shape[0]  # pack s holds the batch's rows s·b … s·b + b − 1
  return (row_SxN + (jnp.arange(S, dtype=row_SxN.dtype) * (batch_size // S))[:, None]).reshape(-1)


def score_one(image_D: jax.Array, labels_LxD: jax.Array, kind: str) -> jax.Array:
  """f_i(x) of one image for L labels: eq. (1) (dot) or paper 001's distance."""
  if kind == 'dot':
    return labels_LxD @ image_D
  sq_dist_L = jnp.sum(jnp.square(labels_LxD - image_D), -1)
  if kind == 'neg_sq_euclidean':
    return -sq_dist_L
  if kind == 'neg_euclidean':
    # sqrt has an infinite slope at 0; the epsilon keeps gradients finite.
    return -jnp.sqrt(sq_dist_L + 1e-12)
  raise ValueError(f'score kind {kind!r} is not one of {SCORES}')


def score(image_BxD: jax.Array, labels_BxLxD: jax.Array, kind: str) -> jax.Array:
  """`score_one` for B images, each with its own L labels (vmapped)."""
  return jax.vmap(lambda x, w: score_one(x, w, kind))(image_BxD, labels_BxLxD)


def score_all(image_BxD: jax.Array, W_CxD: jax.Array, kind: str) -> jax.Array:
  """Scores of every image against a shared block of C labels (evaluation)."""
  if kind == 'dot':
    return image_BxD @ W_CxD.T
  sq_dist_BxC = (jnp.sum(image_BxD**2, -1, keepdims=True) - 2 * image_BxD @ W_CxD.T
                 + jnp.sum(W_CxD**2, -1)[None, :])
  sq_dist_BxC = jnp.maximum(sq_dist_BxC, 0.0)
  if kind == 'neg_sq_euclidean':
    return -sq_dist_BxC
  if kind == 'neg_euclidean':
    return -jnp.sqrt(sq_dist_BxC + 1e-12)
  raise ValueError(f'score kind {kind!r} is not one of {SCORES}')

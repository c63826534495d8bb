"""k-nearest-neighbour annotation (paper 000 §6.3): exact on device, and the
random-projection tree of the paper's approximate k-NN.

An image's label scores are its k nearest training images' labels, each vote
weighted by the similarity (dot product of the l2-normalised bags). Exact
k-NN scores training images in chunks of C on device with a running top-k,
O(B·C·F) memory at any n. The approximate version descends a tree whose
nodes each project on a random direction and split at the median of the
node's training points (balanced), `depth` = p levels, and searches only the
≈ n / 2^p training points of the query's leaf.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.data.batching import PaddedImages
from wsabie_jax.core import evaluation, precision


@functools.partial(jax.jit, static_argnames=('k', 'num_features', 'chunk'))
@precision.full_float32
def neighbours(q_idx_BxF, q_val_BxF, t_idx_NxF, t_val_NxF, *, k: int, num_features: int,
               chunk: int = 1024):
  """(similarities_Bxk, training rows_Bxk) of the k most similar training images."""
  B = q_idx_BxF.shape[0]
  dense_Bxd = evaluation.dense_rows(q_idx_BxF, q_val_BxF, num_features)
  N = t_idx_NxF.shape[0]
  num_chunks = -(-N // chunk)
  pad = num_chunks * chunk - N
  t_idx = jnp.pad(t_idx_NxF, ((0, pad), (0, 0))).reshape(num_chunks, chunk, -1)
  t_val = jnp.pad(t_val_NxF, ((0, pad), (0, 0))).reshape(num_chunks, chunk, -1)
  starts = jnp.arange(num_chunks) * chunk

  def scan(carry, xs):
    best_s, best_i = carry
    idx_CxF, val_CxF, start = xs
    sims_BxC = jnp.einsum('bcf,cf->bc', dense_Bxd[:, idx_CxF], val_CxF)
    rows_C = start + jnp.arange(chunk)
    sims_BxC = jnp.where(rows_C[None] < N, sims_BxC, -jnp.inf)
    s = jnp.concatenate([best_s, sims_BxC], 1)
    i = jnp.concatenate([best_i, jnp.broadcast_to(rows_C, (B, chunk))], 1)
    best_s, where = jax.lax.top_k(s, k)
    return (best_s, jnp.take_along_axis(i, where, 1)), None

  init = (jnp.full((B, k), -jnp.inf), jnp.zeros((B, k), jnp.int32))
  (best_s, best_i), _ = jax.lax.scan(scan, init, (t_idx, t_val, starts))
  return best_s, best_i


@functools.partial(jax.jit, static_argnames=('num_labels',))
def vote(sims_Bxk, rows_Bxk, train_pos_NxP, num_labels: int) -> jax.Array:
  """B×Y label scores: each neighbour adds its similarity to each of its labels."""
  labels_BxkxP = train_pos_NxP[rows_Bxk]
  w = jnp.where(jnp.isfinite(sims_Bxk), sims_Bxk, 0.0)
  B = sims_Bxk.shape[0]
  return jnp.zeros((B, num_labels + 1)).at[
      jnp.arange(B)[:, None, None], labels_BxkxP].add(
          jnp.broadcast_to(w[:, :, None], labels_BxkxP.shape))[:, :num_labels]


def exact_scores(train: PaddedImages, num_features: int, num_labels: int, k: int = 20,
                 chunk: int = 1024):
  """score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y by exact k-NN."""
  t_idx, t_val, t_pos = map(jnp.asarray, (train.feat_idx_nxF, train.feat_val_nxF, train.pos_nxP))

  def score(idx, val):
    s, i = neighbours(jnp.asarray(idx), jnp.asarray(val), t_idx, t_val, k=k,
                      num_features=num_features, chunk=chunk)
    return vote(s, i, t_pos, num_labels)
  return score


class RandomProjectionTree:
  """Balanced random-projection tree over the training images (paper 000 §6.3)."""

  def __init__(self, train: PaddedImages, num_features: int, depth: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    self.depth, self.train, self.num_features = depth, train, num_features
    self.directions = rng.normal(size=(2 ** depth - 1, num_features)).astype(np.float32)
    self.thresholds = np.zeros(2 ** depth - 1, np.float32)
    proj = lambda node, rows: np.einsum('nf,nf->n', train.feat_val_nxF[rows],
                                        self.directions[node][train.feat_idx_nxF[rows]])
    self.leaves = [None] * (2 ** depth)
    stack = [(0, np.arange(len(train.num_pos_n)))]
    while stack:
      node, rows = stack.pop()
      if node >= 2 ** depth - 1:
        self.leaves[node - (2 ** depth - 1)] = rows
        continue
      p = proj(node, rows)
      self.thresholds[node] = np.median(p) if len(p) else 0.0
      left = p <= self.thresholds[node]
      stack += [(2 * node + 1, rows[left]), (2 * node + 2, rows[~left])]

  def leaf_of(self, feat_idx_BxF, feat_val_BxF) -> np.ndarray:
    node = np.zeros(len(feat_idx_BxF), np.int64)
    for _ in range(self.depth):
      p = np.einsum('bf,bf->b', feat_val_BxF, self.directions[node[:, None], feat_idx_BxF])
      node = 2 * node + 1 + (p > self.thresholds[node])
    return node - (2 ** self.depth - 1)

  def scores(self, num_labels: int, k: int = 20, chunk: int = 1024):
    """score_fn by exact k-NN within each query's leaf (≈ n / 2^depth points)."""
    t = self.train
    pos_NxP = jnp.asarray(t.pos_nxP)

    def score(idx, val):
      idx, val = np.asarray(idx), np.asarray(val)
      leaf = self.leaf_of(idx, val)
      out = np.zeros((len(idx), num_labels), np.float32)
      for l in np.unique(leaf):
        q, rows = np.flatnonzero(leaf == l), self.leaves[l]
        if len(rows) == 0:
          continue
        # A leaf's queries padded to a power of two (zero rows, results dropped):
        # a few shapes to compile, not one a leaf (most of this baseline's time).
        size = 1 << max(0, (len(q) - 1).bit_length())
        q_idx, q_val = np.zeros((size, idx.shape[1]), idx.dtype), np.zeros((size, val.shape[1]), val.dtype)
        q_idx[:len(q)], q_val[:len(q)] = idx[q], val[q]
        s, i = neighbours(jnp.asarray(q_idx), jnp.asarray(q_val), jnp.asarray(t.feat_idx_nxF[rows]),
                          jnp.asarray(t.feat_val_nxF[rows]), k=min(k, len(rows)),
                          num_features=self.num_features, chunk=min(chunk, len(rows)))
        out[q] = np.asarray(vote(s, jnp.asarray(rows)[i], pos_NxP, num_labels))[:len(q)]
      return jnp.asarray(out)
    return score

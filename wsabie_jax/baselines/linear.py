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

from wsabie_jax.core import evaluation, row_scatter, samplers
from wsabie_jax.data.batching import pad_images
from wsabie_jax.data.dataset import SparseDataset


@functools.partial(jax.jit, static_argnames=('num_labels',), donate_argnums=0)
def _one_vs_rest_block(W_dxY, feat_idx_NxF, feat_val_NxF, pos_NxP, C, *, num_labels):
  """PA-I over N examples in order (a block of an epoch: `_blocks`)."""
  def visit(W, example):
    idx_F, val_F, pos_P = example
    rows_FxY = W[idx_F]
    y_Y = jnp.where(jnp.zeros(num_labels + 1, bool).at[pos_P].set(True)[:num_labels], 1.0, -1.0)
    loss_Y = jnp.maximum(0.0, 1.0 - y_Y * (val_F @ rows_FxY))
    tau_Y = jnp.minimum(C, loss_Y / jnp.maximum(jnp.sum(val_F ** 2), 1e-12))
    # W[f] += x_f·τy for the example's features f: on the CPU one pass, no
    # gathered F×Y buffer (core/row_scatter.py; docs/RESULTS.md "The One-vs-Rest
    # member" times the member)
    return row_scatter.add_scaled_rows(W, idx_F, val_F, (tau_Y * y_Y)[None, :],
                                       jnp.zeros_like(idx_F)), None

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


BLOCK = 256             # One-vs-Rest: at most this many examples a call, like in length …
CELLS = 64 * BLOCK      # … and at most this many feature slots (rows × width) …
WINDOW = 16 * BLOCK     # … sorted by length within windows of the random order this long
MIN_WIDTH = 8


def width_of(length):
  """The padded width of examples of `length` non-zeros (an int or an array):
  the power of two at or above, MIN_WIDTH at least."""
  return np.maximum(MIN_WIDTH, 2 ** np.ceil(np.log2(np.maximum(length, 1))).astype(np.int64))


def rows_at(width):
  """Examples a block of this width holds (one program a width; an int or an array)."""
  return np.maximum(1, np.minimum(BLOCK, CELLS // width))


def _blocks(order: np.ndarray, lengths: np.ndarray, rng) -> list[tuple[np.ndarray, int]]:
  """An epoch's order as blocks of like length, each with its width: the
  power of two at or above its longest, and rows_at(width) examples at most.
  Padded to the longest example of the set, every example would cost that
  one's non-zeros (debtags: 1,746 against a mean of 34); cut every BLOCK
  examples whatever their width, each block holding one of debtags' few long
  packages padded 255 short ones to it (3.0 slots visited a non-zero; 1.6
  with rows_at). Within each WINDOW of the random order the examples go by
  length; the blocks go in a random order."""
  blocks = []
  for window in np.split(order, range(WINDOW, len(order), WINDOW)):
    window = window[np.argsort(lengths[window], kind='stable')]
    width = width_of(lengths[window])  # (non-decreasing: a block's width is its last's)
    # A block from `start` takes examples while it holds fewer than its last
    # one's rows_at: it ends at the first e with e − rows_at(width[e]) ≥ start,
    # a search, as e − rows_at(width[e]) rises with e (rows_at falls as width
    # grows). (A Python step an example took 0.39 s of host time over
    # debtags' 10 epochs, hidden behind the device's steps on 2 cores.)
    last_start = np.arange(len(window)) - rows_at(width)
    start = 0
    while start < len(window):
      end = int(np.searchsorted(last_start, start))
      blocks.append((window[start:end], int(width[end - 1])))
      start = end
  return [blocks[i] for i in rng.permutation(len(blocks))]


def _rows(indptr: np.ndarray, values: np.ndarray, rows: np.ndarray, width: int, fill, dtype):
  """CSR rows `rows`, left-aligned in a len(rows)×width array padded with `fill`
  (a row −1: all padding, which a PA-I visit leaves W unchanged by)."""
  real = rows >= 0
  start = np.where(real, indptr[np.maximum(rows, 0)], 0)
  length = np.where(real, np.diff(indptr)[np.maximum(rows, 0)], 0)
  at = np.arange(width)
  where = np.minimum(start[:, None] + at, max(len(values) - 1, 0))
  return np.where(at < length[:, None], values[where] if len(values) else fill, fill).astype(dtype)


def train_linear(train: SparseDataset, kind: str, C: float = 1.0, epochs: int = 5,
                 seed: int = 0, average: bool = False) -> jax.Array:
  """W (d×Y) of One-vs-Rest ('ovr') or PAMIR-IA ('pamir'), examples in a fresh
  order per epoch. `average`: the mean of the W's that end the epochs of the
  second half, not the last (an online learner's last W follows the last examples)."""
  Y = train.num_labels
  W = jnp.zeros((train.num_features, Y), jnp.float32)
  total, kept = jnp.zeros_like(W) if average else None, 0
  rng = np.random.default_rng(seed)
  f_len = np.diff(train.feat_indptr)
  P = max(int(np.diff(train.label_indptr).max(initial=1)), 1)
  padded = pad_images(train) if kind == 'pamir' else None
  for epoch in range(epochs):
    if average and epoch >= epochs // 2 and epoch:
      total, kept = total + W, kept + 1
    if kind == 'ovr':
      for rows, width in _blocks(rng.permutation(train.num_images), f_len, rng):
        # (a shape a width: a row −1 is all padding)
        rows = np.pad(rows, (0, rows_at(width) - len(rows)), constant_values=-1)
        W = _one_vs_rest_block(
            W, _rows(train.feat_indptr, train.feat_idx, rows, width, 0, np.int32),
            _rows(train.feat_indptr, train.feat_val, rows, width, 0, np.float32),
            _rows(train.label_indptr, train.label_idx, rows, P, Y, np.int32), C, num_labels=Y)
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
  return (total + W) / (kept + 1) if average else W


def linear_scores(W_dxY: jax.Array):
  """score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y for evaluation.evaluate_ranking
  (W an argument of one program, not a constant of a new one per model)."""
  return functools.partial(_linear_scores, jnp.asarray(W_dxY))


@jax.jit
def _linear_scores(W_dxY, feat_idx_BxF, feat_val_BxF):
  return evaluation.rows_times(W_dxY, feat_idx_BxF, feat_val_BxF)

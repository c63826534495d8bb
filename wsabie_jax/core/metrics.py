"""Exact ranking metrics (paper 000 §4, paper 003, paper 004), bounded memory.

Every label is scored, in chunks of C labels, on device: per image we keep the
exact 0-based rank of each positive and a running top-k — O(B·(C + k)) memory
at any Y. Ranking order: score descending, ties broken by lower label id (the
order `lax.top_k` gives), so every metric below reads one consistent ranking.
Host code then turns ranks and top-k into p@k, r@k, MAP, AUC, mean rank,
psib@k and per-class/overall P/R/F1@k.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import lane_sums, model
from wsabie_jax.core import precision


@functools.partial(jax.jit, static_argnames=('k', 'score_kind', 'chunk'))
@precision.full_float32
def rank_and_top_k(image_BxD: jax.Array, W_YxD: jax.Array, pos_BxP: jax.Array,
                   *, k: int, score_kind: str, chunk: int = 4096,
                   known_BxE: jax.Array | None = None):
  """Exact ranks of the positives (−1 where padded) and the top-k labels.

  pos_BxP holds label ids, padded with any id outside [0, Y). Labels in
  known_BxE (leave-one-out: what training knows of the image) are left out of
  the ranking: scored −∞, never above a positive nor in the top-k.
  Two passes over the label chunks: the first reads each positive's score off
  a matmul that scores the chunk, the second counts the other labels ranked
  above it.
  """
  num_labels, dim = W_YxD.shape
  chunk = min(chunk, num_labels)
  num_chunks = -(-num_labels // chunk)
  W_pad = jnp.zeros((num_chunks * chunk, dim), W_YxD.dtype).at[:num_labels].set(W_YxD)
  W_chunks = W_pad.reshape(num_chunks, chunk, dim)
  starts = jnp.arange(num_chunks) * chunk
  valid_BxP = (pos_BxP >= 0) & (pos_BxP < num_labels)
  batch = image_BxD.shape[0]

  def chunk_scores(W_CxD, start):
    ids_C = start + jnp.arange(chunk)
    scores_BxC = model.score_all(image_BxD, W_CxD, score_kind)
    keep_BxC = jnp.broadcast_to(ids_C[None, :] < num_labels, scores_BxC.shape)
    if known_BxE is not None:
      keep_BxC &= ~jnp.any(ids_C[None, :, None] == known_BxE[:, None, :], axis=2)
    return ids_C, jnp.where(keep_BxC, scores_BxC, -jnp.inf)

  def read_pos(pos_score_BxP, xs):
    ids_C, scores_BxC = chunk_scores(*xs)
    offset_BxP = pos_BxP - xs[1]
    inside_BxP = (offset_BxP >= 0) & (offset_BxP < chunk)
    got_BxP = jnp.take_along_axis(scores_BxC, jnp.clip(offset_BxP, 0, chunk - 1), 1)
    return jnp.where(inside_BxP, got_BxP, pos_score_BxP), None

  pos_score_BxP, _ = jax.lax.scan(read_pos, jnp.zeros(pos_BxP.shape, jnp.float32),
                                  (W_chunks, starts))

  def count_and_top_k(carry, xs):
    above_BxP, top_s_Bxk, top_i_Bxk = carry
    ids_C, scores_BxC = chunk_scores(*xs)
    p_BxPx1 = pos_score_BxP[:, :, None]

    def before(c0, c1):  # labels c0:c1 of the chunk ranked above each positive
      s_BxPxC, ids = scores_BxC[:, None, c0:c1], ids_C[None, None, c0:c1]
      return (((s_BxPxC > p_BxPx1) | ((s_BxPxC == p_BxPx1) & (ids < pos_BxP[:, :, None])))
              # Never the positive itself: XLA may compile the two passes' matmuls
              # differently (e.g. fuse the first pass's gather into it), so the
              # positive's score here can exceed the one read in the first pass by an ulp.
              & (ids != pos_BxP[:, :, None])).astype(jnp.int32)

    above_BxP = above_BxP + lane_sums.sum_along(before, chunk, axis=2, width=32)
    merged_s = jnp.concatenate([top_s_Bxk, scores_BxC], axis=1)
    merged_i = jnp.concatenate([top_i_Bxk, jnp.broadcast_to(ids_C, (batch, chunk))], axis=1)
    # The running top-k holds lower ids than the chunk, so top_k's preference for
    # the earlier position on ties keeps the label-id tie-break exact.
    top_s_Bxk, where_Bxk = jax.lax.top_k(merged_s, k)
    return (above_BxP, top_s_Bxk, jnp.take_along_axis(merged_i, where_Bxk, 1)), None

  init = (jnp.zeros(pos_BxP.shape, jnp.int32), jnp.full((batch, k), -jnp.inf),
          jnp.full((batch, k), num_labels, jnp.int32))
  (above_BxP, top_s_Bxk, top_i_Bxk), _ = jax.lax.scan(count_and_top_k, init, (W_chunks, starts))
  return jnp.where(valid_BxP, above_BxP, -1), top_i_Bxk, top_s_Bxk


class NonFiniteScores(ValueError):
  """A model's scores hold NaN or inf: every rank read from them would be
  meaningless (NaN compares false, so a NaN model ranks every positive first)."""


@jax.jit
def _count_nonfinite(x: jax.Array) -> jax.Array:
  return jnp.sum(~jnp.isfinite(x))


def require_finite(x: jax.Array, what: str) -> None:
  """Raises NonFiniteScores unless every value of `x` is finite. One compiled
  reduction a shape: as three eager ops it would compile three, inside a
  budgeted run's first validation."""
  bad = int(_count_nonfinite(x))
  if bad:
    raise NonFiniteScores(f'refusing to rank: {bad} of {x.size} values of the {what} are '
                          'NaN or inf (a diverged or corrupted model)')


def per_image_metrics(ranks_BxP: np.ndarray, top_Bxk: np.ndarray, num_labels: int,
                      ks=(1, 5, 10), label_parents_YxG: np.ndarray | None = None,
                      pos_BxP: np.ndarray | None = None,
                      num_known_B: np.ndarray | None = None) -> dict[str, np.ndarray]:
  """Per-image p@k, r@k, AP, AUC, mean 1-based rank of positives, psib@k
  (`num_known_B`: labels left out of each ranking, not counted as negatives).

  ranks_BxP: exact 0-based ranks of each image's positives, −1 for padding.
  psib@k (paper 000 §4) credits a prediction that is a sibling (shares an is-a
  parent, or is equal) of any of the image's positives; it needs the parents
  table and the positives' ids.
  """
  valid = ranks_BxP >= 0
  n_B = valid.sum(1)
  r = np.where(valid, ranks_BxP, np.iinfo(np.int32).max).astype(np.int64)
  out = {}
  for k in ks:
    hits_B = (r < k).sum(1)
    out[f'p@{k}'] = hits_B / k
    out[f'r@{k}'] = hits_B / n_B
  # positives at or above each positive: the numerator of precision at its rank
  at_or_above_BxP = (r[:, None, :] <= r[:, :, None]).sum(-1)
  prec_BxP = np.where(valid, at_or_above_BxP / (r + 1.0), 0.0)
  out['ap'] = prec_BxP.sum(1) / n_B
  # negatives ranked above each positive = rank − positives above it
  neg_above_B = np.where(valid, r - (at_or_above_BxP - 1), 0).sum(1)
  num_neg_B = num_labels - n_B - (0 if num_known_B is None else num_known_B)
  out['auc'] = 1.0 - neg_above_B / np.maximum(n_B * num_neg_B, 1)
  out['mean_rank'] = np.where(valid, r + 1, 0).sum(1) / n_B
  if label_parents_YxG is not None:
    out.update(sibling_precision(top_Bxk, pos_BxP, label_parents_YxG, ks))
  return out


def sibling_matrix(label_parents_YxG: np.ndarray):
  """S of paper 000 §4 as a sparse Y×Y matrix: S_ij = 1 if i = j or i and j share
  an is-a parent (−1 pads the parent lists). O(Σ_parents |children|²) entries.

  psib@k reads the same relation without building S (`is_sibling`)."""
  from scipy import sparse
  Y = label_parents_YxG.shape[0]
  child_C, col = np.nonzero(label_parents_YxG >= 0)
  parent_C = label_parents_YxG[child_C, col]
  order = np.argsort(parent_C, kind='stable')
  child_C, parent_C = child_C[order], parent_C[order]
  starts = np.flatnonzero(np.diff(parent_C, prepend=-2))
  rows, cols = [np.arange(Y)], [np.arange(Y)]
  for a, b in zip(starts, list(starts[1:]) + [len(parent_C)]):
    kids = child_C[a:b]
    rows.append(np.repeat(kids, len(kids)))
    cols.append(np.tile(kids, len(kids)))
  S = sparse.coo_matrix((np.ones(sum(map(len, rows)), bool), (np.concatenate(rows),
                                                              np.concatenate(cols))), (Y, Y))
  return S.tocsr().astype(bool)


def is_sibling(a_N: np.ndarray, b_N: np.ndarray, label_parents_YxG: np.ndarray) -> np.ndarray:
  """S_ab of paper 000 §4: 1 if a = b or they share an is-a parent (−1 pads parents)."""
  pa_NxG = label_parents_YxG[a_N]
  pb_NxG = label_parents_YxG[b_N]
  shared = ((pa_NxG[:, :, None] == pb_NxG[:, None, :]) & (pa_NxG[:, :, None] >= 0)).any((1, 2))
  return shared | (a_N == b_N)


def sibling_precision(top_Bxk, pos_BxP, label_parents_YxG, ks) -> dict[str, np.ndarray]:
  num_labels = label_parents_YxG.shape[0]
  B, kmax = top_Bxk.shape
  P = pos_BxP.shape[1]
  a = np.broadcast_to(top_Bxk[:, :, None], (B, kmax, P)).reshape(-1)
  b = np.broadcast_to(pos_BxP[:, None, :], (B, kmax, P)).reshape(-1)
  valid = (b >= 0) & (b < num_labels) & (a < num_labels)
  sib = np.zeros(a.shape, bool)
  sib[valid] = is_sibling(a[valid], b[valid], label_parents_YxG)
  credit_Bxk = sib.reshape(B, kmax, P).any(-1)
  return {f'psib@{k}': credit_Bxk[:, :k].sum(1) / k for k in ks}


class ClassCounts:
  """Per-class true positives / predictions / ground truth for P/R/F1@k (paper 004)."""

  def __init__(self, num_labels: int):
    self.tp = np.zeros(num_labels, np.int64)
    self.predicted = np.zeros(num_labels, np.int64)
    self.actual = np.zeros(num_labels, np.int64)

  def add(self, top_Bxk: np.ndarray, pos_BxP: np.ndarray):
    Y = len(self.tp)
    pos_ok = (pos_BxP >= 0) & (pos_BxP < Y)
    hit_Bxk = (top_Bxk[:, :, None] == np.where(pos_ok, pos_BxP, -1)[:, None, :]).any(-1)
    np.add.at(self.predicted, top_Bxk[top_Bxk < Y], 1)
    np.add.at(self.tp, top_Bxk[hit_Bxk], 1)
    np.add.at(self.actual, pos_BxP[pos_ok], 1)

  def summary(self, k: int) -> dict[str, float]:
    """Per-class P/R/F1 averaged over classes present in the ground truth; overall = pooled."""
    present = self.actual > 0
    p_c = np.divide(self.tp, self.predicted, out=np.zeros(len(self.tp)), where=self.predicted > 0)
    r_c = np.divide(self.tp, self.actual, out=np.zeros(len(self.tp)), where=present)
    f_c = np.divide(2 * p_c * r_c, p_c + r_c, out=np.zeros(len(self.tp)), where=(p_c + r_c) > 0)
    p_o = self.tp.sum() / max(self.predicted.sum(), 1)
    r_o = self.tp.sum() / max(self.actual.sum(), 1)
    f_o = 2 * p_o * r_o / (p_o + r_o) if p_o + r_o > 0 else 0.0
    return {f'class_p@{k}': float(p_c[present].mean()) if present.any() else 0.0,
            f'class_r@{k}': float(r_c[present].mean()) if present.any() else 0.0,
            f'class_f1@{k}': float(f_c[present].mean()) if present.any() else 0.0,
            f'overall_p@{k}': float(p_o), f'overall_r@{k}': float(r_o), f'overall_f1@{k}': float(f_o)}


@functools.partial(jax.jit, static_argnames=('k',))
def rank_and_top_k_from_scores(scores_BxY: jax.Array, pos_BxP: jax.Array, *, k: int):
  """`rank_and_top_k` for models that score labels directly (k-NN votes, linear
  baselines, ensembles): the same ranks, ties broken by lower label id."""
  B, Y = scores_BxY.shape
  valid_BxP = (pos_BxP >= 0) & (pos_BxP < Y)
  pos_score_BxP = jnp.take_along_axis(scores_BxY, jnp.clip(pos_BxP, 0, Y - 1), 1)
  ids_Y = jnp.arange(Y)

  def before(y0, y1):  # labels y0:y1 ranked above each positive
    s_BxPxY = scores_BxY[:, None, y0:y1]
    return ((s_BxPxY > pos_score_BxP[:, :, None])
            | ((s_BxPxY == pos_score_BxP[:, :, None])
               & (ids_Y[None, None, y0:y1] < pos_BxP[:, :, None]))).astype(jnp.int32)

  ranks_BxP = lane_sums.sum_along(before, Y, axis=2, width=32)  # (core/lane_sums.py)
  top_s, top_i = jax.lax.top_k(scores_BxY, k)
  return jnp.where(valid_BxP, ranks_BxP, -1), top_i, top_s


def for_file(metrics: dict) -> dict:
  """Metrics as a file keeps them: floats to 7 significant digits (0.123, not
  0.12300000000000003: the noise of a float sum, not a digit a metric has)."""
  return {k: float(f'{v:.7g}') if isinstance(v, float) else v for k, v in metrics.items()}

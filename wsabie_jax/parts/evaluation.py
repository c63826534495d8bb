"""Paper 002 §6.2's three tasks, exact: Image Annotation, Part-Object Labeling, Triplet.

For a quadruplet (Io, Lo, Ip, Lp) let a = f_I(Io, ·) and b = f_I(Ip, ·) over
the K labels. A scoring adds β·W_i·W_j (β = α for "Image-Word", 0 for
"Image") and, for the WordNet-offset variant (§6.5), λ·R_ij with R the
training part-of relations:

  Part-Object Labeling  rank of (Lo, Lp) among all K² pairs by a_i + b_j + β W_i·W_j + λ R_ij;
  Triplet               rank of Lo given Lp (a_i + β W_i·W_Lp + λ R_i,Lp), and of Lp given Lo;
  Image Annotation      rank of Lo by a, of Lp by b.

Ranks count the candidates scored strictly higher. The K² count runs on
device over chunks of C object labels (B×C×K scores at a time, never B×K²),
so nothing of size K² per quadruplet is ever held. Under the Image scorings
(β = 0) a pair scores a_i + b_j (plus the offset at the relations): the count
is a binary search per part label over a sorted, the relations' cells then
counted at their offset scores (`sum_pair_ranks`, K log K + R). p@k =
1{rank < k}/k and MAP = mean 1/(rank + 1), as paper 002 defines them for one
correct answer.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import model
from wsabie_jax.core import precision


@functools.partial(jax.jit, static_argnames=('chunk',))
def pair_ranks(a_BxK, b_BxK, W_KxD, lo_B, lp_B, beta, offset_KxK, chunk: int = 64):
  """Exact rank of (lo, lp) among the K² pairs, per quadruplet."""
  K = a_BxK.shape[1]
  num_chunks = -(-K // chunk)
  rows = jnp.arange(num_chunks * chunk).reshape(num_chunks, chunk)
  rows_valid = rows < K
  rows = jnp.minimum(rows, K - 1)
  B = a_BxK.shape[0]
  true_B = (a_BxK[jnp.arange(B), lo_B] + b_BxK[jnp.arange(B), lp_B]
            + beta * jnp.sum(W_KxD[lo_B] * W_KxD[lp_B], -1) + offset_KxK[lo_B, lp_B])

  def count(total_B, xs):
    rows_C, valid_C = xs
    label_CxK = beta * W_KxD[rows_C] @ W_KxD.T + offset_KxK[rows_C]
    s_BxCxK = a_BxK[:, rows_C][:, :, None] + b_BxK[:, None, :] + label_CxK[None]
    # The true pair's own cell is left out by position, not by comparing its
    # score: the grid sums it by a matmul, true_B elementwise, and their
    # round-off may differ (TF32 on a GPU by far more), ranking it below itself.
    itself_BxCxK = ((rows_C[None, :, None] == lo_B[:, None, None])
                    & (jnp.arange(K)[None, None, :] == lp_B[:, None, None]))
    above = (s_BxCxK > true_B[:, None, None]) & valid_C[None, :, None] & ~itself_BxCxK
    return total_B + jnp.sum(above, (1, 2), dtype=jnp.int32), None

  total_B, _ = jax.lax.scan(count, jnp.zeros((B,), jnp.int32), (rows, rows_valid))
  return total_B


@jax.jit
def sum_pair_ranks(a_BxK, b_BxK, lo_B, lp_B, offset_KxK=None, lifted_Nx2=None):
  """`pair_ranks` where β = 0 (the "Image" scorings), in O(K log K + N) a
  quadruplet, not K²: a pair scores a_i + b_j, plus offset_ij at the N cells
  `lifted_Nx2` (every non-zero of `offset_KxK`: the WordNet offset's training
  relations, each once). For each part label j the object labels i with
  a_i + b_j above the true pair's score are the first of a sorted high to low
  (float addition is monotone), counted by a binary search that compares as
  the grid does; then each lifted cell's count is taken at its lifted score.
  The true pair's own score is its own sum, never above itself."""
  assert (offset_KxK is None) == (lifted_Nx2 is None), 'the offset and its cells go together'
  B, K = a_BxK.shape
  rows = jnp.arange(B)
  true_B = a_BxK[rows, lo_B] + b_BxK[rows, lp_B]
  if offset_KxK is not None:
    true_B = true_B + offset_KxK[lo_B, lp_B]
  a_desc_BxK = -jnp.sort(-a_BxK, axis=1)

  def halve(_, bounds):  # the count lies in [low, high]
    low, high = bounds
    mid = jnp.minimum((low + high) // 2, K - 1)
    above = jnp.take_along_axis(a_desc_BxK, mid, 1) + b_BxK > true_B[:, None]
    searching = low < high
    return (jnp.where(searching & above, mid + 1, low),
            jnp.where(searching & ~above, mid, high))

  bounds = (jnp.zeros((B, K), jnp.int32), jnp.full((B, K), K, jnp.int32))
  count_BxK, _ = jax.lax.fori_loop(0, int(np.ceil(np.log2(K + 1))), halve, bounds)
  count_B = jnp.sum(count_BxK, 1)
  if lifted_Nx2 is not None:
    i, j = lifted_Nx2[:, 0], lifted_Nx2[:, 1]
    sum_BxN = a_BxK[:, i] + b_BxK[:, j]
    count_B += (jnp.sum(sum_BxN + offset_KxK[i, j] > true_B[:, None], 1, dtype=jnp.int32)
                - jnp.sum(sum_BxN > true_B[:, None], 1, dtype=jnp.int32))
  return count_B


@jax.jit
def triplet_ranks(a_BxK, b_BxK, W_KxD, lo_B, lp_B, beta, offset_KxK):
  """(rank of Lo given Lp, rank of Lp given Lo)."""
  B = a_BxK.shape[0]
  obj_BxK = a_BxK + beta * W_KxD[lp_B] @ W_KxD.T + offset_KxK[:, lp_B].T
  part_BxK = b_BxK + beta * W_KxD[lo_B] @ W_KxD.T + offset_KxK[lo_B]
  rank = lambda s_BxK, true_B: jnp.sum(s_BxK > s_BxK[jnp.arange(B), true_B][:, None], 1)
  return rank(obj_BxK, lo_B), rank(part_BxK, lp_B)


@jax.jit
def couple_ranks(a_BxK, b_BxK, W_KxD, lo_B, lp_B, beta, offset_KxK, couples_Cx2):
  """Rank of (lo, lp) among a list of candidate couples (§6.5, Table 5: the
  training relations and the unseen ones), scored as in `pair_ranks`."""
  ci, cj = couples_Cx2[:, 0], couples_Cx2[:, 1]
  B = a_BxK.shape[0]
  s_BxC = (a_BxK[:, ci] + b_BxK[:, cj] + beta * jnp.sum(W_KxD[ci] * W_KxD[cj], -1)[None]
           + offset_KxK[ci, cj][None])
  true_B = (a_BxK[jnp.arange(B), lo_B] + b_BxK[jnp.arange(B), lp_B]
            + beta * jnp.sum(W_KxD[lo_B] * W_KxD[lp_B], -1) + offset_KxK[lo_B, lp_B])
  return jnp.sum(s_BxC > true_B[:, None], 1)


@jax.jit
def annotation_rank(s_BxK, true_B):
  return jnp.sum(s_BxK > s_BxK[jnp.arange(s_BxK.shape[0]), true_B][:, None], 1)


def rank_metrics(ranks: np.ndarray, prefix: str) -> dict[str, float]:
  ranks = np.asarray(ranks, np.float64)
  return {f'{prefix}p@1': float(np.mean(ranks < 1)), f'{prefix}p@10': float(np.mean(ranks < 10) / 10),
          f'{prefix}map': float(np.mean(1.0 / (ranks + 1))), f'{prefix}mean_rank': float(ranks.mean() + 1)}


SCORINGS = {'iw': 'Image-Word', 'i': 'Image', 'io': 'Image + WordNet offset'}


@precision.full_float32
def evaluate(V_dxD, W_KxD, T_KxD, quads: dict, alpha: float, relations_Rx2=None,
             offset: float = 100.0, batch_size: int = 128, chunk: int = 64,
             scorings=('iw', 'i'), couples_Cx2=None) -> dict[str, float]:
  """The three tasks over fixed quadruplets (a batch dict as QuadrupletStream.batch).

  Metric names: `<scoring>_<task>_<metric>`, scoring iw / i / io, task
  annot / pair / triplet (and `couples`, the rank among `couples_Cx2`, when
  given); e.g. iw_pair_map. `io` adds λ = `offset` to the pairs in
  `relations_Rx2` (the relations training saw).
  """
  K = W_KxD.shape[0]
  R = np.zeros((K, K), np.float32)
  if relations_Rx2 is not None and len(relations_Rx2):
    R[relations_Rx2[:, 0], relations_Rx2[:, 1]] = offset
  # R's non-zero cells, each once ('io' alone reads them; None elsewhere, so
  # the other scorings' program does not change with the relations' count)
  lifted = jnp.asarray(np.argwhere(R), jnp.int32) if 'io' in scorings else None
  R = jnp.asarray(R)  # (on the device once, not at every batch)
  couples = None if couples_Cx2 is None else jnp.asarray(couples_Cx2)
  n = len(quads['obj_label_B'])
  ranks: dict[str, list] = {}
  for start in range(0, n, batch_size):
    # every batch batch_size rows (the last one's tail repeats its last row,
    # and is cut off below): one program for every batch of every split
    rows = np.minimum(np.arange(start, start + batch_size), n - 1)
    got = _batch_ranks(V_dxD, W_KxD, T_KxD, {k: quads[k][rows] for k in _QUAD_FIELDS},
                       jnp.float32(alpha), R, lifted, couples, scorings=tuple(scorings),
                       chunk=chunk)
    real = min(batch_size, n - start)
    for task, each in jax.device_get(got).items():
      ranks.setdefault(task, []).extend(r[:real] for r in each)
  out = {}
  for task, parts in ranks.items():
    out.update(rank_metrics(np.concatenate(parts), f'{task}_'))
  return out


_QUAD_FIELDS = ('obj_idx_BxF', 'obj_val_BxF', 'part_idx_BxF', 'part_val_BxF', 'obj_label_B',
                'part_label_B')


@functools.partial(jax.jit, static_argnames=('scorings', 'chunk'))
@precision.full_float32
def _batch_ranks(V_dxD, W_KxD, T_KxD, batch: dict, alpha, R_KxK, lifted_Nx2, couples_Cx2, *,
                 scorings, chunk: int) -> dict:
  """{task: (ranks, …)} of one batch of quadruplets: annotation (Lo's by a,
  Lp's by b), and each scoring's pair, triplet (Lo given Lp, Lp given Lo)
  and couples (where `couples_Cx2` is given). One program: run op by op, a
  batch compiled some hundred small ones."""
  a = model.score_all(model.embed_images(V_dxD[batch['obj_idx_BxF']], batch['obj_val_BxF']),
                      T_KxD, 'dot')
  b = model.score_all(model.embed_images(V_dxD[batch['part_idx_BxF']], batch['part_val_BxF']),
                      T_KxD, 'dot')
  lo, lp = batch['obj_label_B'], batch['part_label_B']
  zero = jnp.zeros_like(R_KxK)
  settings = {'iw': (alpha, zero), 'i': (0.0, zero), 'io': (0.0, R_KxK)}
  out = {'annot': (annotation_rank(a, lo), annotation_rank(b, lp))}
  for name in scorings:
    beta, off = settings[name]
    if name == 'iw':
      pair = pair_ranks(a, b, W_KxD, lo, lp, beta, off, chunk)
    else:  # β = 0: sorted, the offset's cells counted apart ('io')
      pair = sum_pair_ranks(a, b, lo, lp, *((off, lifted_Nx2) if name == 'io' else ()))
    out[f'{name}_pair'] = (pair,)
    out[f'{name}_triplet'] = triplet_ranks(a, b, W_KxD, lo, lp, beta, off)
    if couples_Cx2 is not None:
      out[f'{name}_couples'] = (couple_ranks(a, b, W_KxD, lo, lp, beta, off, couples_Cx2),)
  return out


def nearest_labels(W_KxD, names: list[str], queries: list[str], k: int = 5) -> dict[str, list[str]]:
  """Paper 002 Table 6: each query label's k nearest labels by cosine in W."""
  W = np.asarray(W_KxD, np.float64)
  unit = W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)
  index = {n: i for i, n in enumerate(names)}
  out = {}
  for q in queries:
    sims = unit @ unit[index[q]]
    sims[index[q]] = -np.inf
    out[q] = [names[i] for i in np.argsort(-sims)[:k]]
  return out

"""How a WSABIE step reads and updates its two tables: by the rows it touches,
or whole by matmuls where the tables are small enough that a batch covers them.

The cost model (docs/DESIGN.md §1) gathers the rows a step uses — B·(K+1)
label rows, the batch's N feature non-zeros — and scatters their gradients
back: O(B·(K + nnz)·D) whatever the tables' sizes. On small tables those rows
are every row many times over (Corel5k: B·K = 51,200 draws of 374 labels;
enron: 12,000 non-zeros of 1,001 visual words), and moving B·K·D floats
through gathers and scatters costs more than one B×Y×D matmul. There a table
is read and updated whole:

  labels    S = images·Wᵀ (B×Y) gives the positive's and the K draws' scores
            (the same draws, violators and weights as the gathered step);
            the loss's slope per score, scattered into C (B×Y), gives
            ∂/∂images = C·W and ∂/∂W = Cᵀ·images;
  features  X (B×d) from the packed non-zeros gives images = X·V and
            ∂/∂V = Xᵀ·∂/∂images.

It is the same update (row_optim.update_dense keeps each piece's Adagrad
term and steps and projects only the rows the batch named), up to float
summation order. With dot scores and no l2 only: each piece's gradient is
then a slope times a row, so its Adagrad term is a product too.

The exact rank (loss.kind 'exact', eq. (6) with (7)) reads the labels whole
the same way (`exact_label_grads`): S holds every label's score, so each
pair's violators are counted, not drawn.
`model.tables` chooses: 'rows', 'whole' (both), 'labels', 'features', or
'by_size' (`choose`: from the step's shapes, when it is traced).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax.core import lane_sums, model, row_optim
from wsabie_jax.wsabie import warp
from wsabie_jax.wsabie.settings import StepConfig

# 'by_size' reads a table whole where a batch covers it many times over: the
# labels when Y ≤ 24·(K+Q) (a row's Q positives and K draws are gathered
# label rows), the features when B·d ≤ 20·N non-zeros. Gathering costs about
# a hundred matmul multiply-adds a float once the B·(K+Q)·D gathered floats
# leave the caches (B 512, Q 1, D 128: K 10 gathers in 0.66 ms at any Y ≤
# 3,000, K 100 in ~10 ms), so at the panel's B 1,024 and D 128 the whole table
# wins up to Y ≈ 22–29·(K+Q): text (Y 433, Q 5) is 1.4× faster whole at K 25
# and 1.3× slower at K 10; Delicious (Y 983, Q 21) 1.6× faster at K 25. While
# they stay in the caches (up to GATHERED_IN_CACHE_BYTES) a gather costs a few
# multiply-adds a float and the whole table wins only up to Y ≈ 8·(K+Q): the
# default job (configs/wsabie_synthetic.py: Y 2,000, K 100, Q 1, B 256, D 64,
# 6.6 MB gathered) ran 62.6k pairs/s whole and 106.7k by rows on 2 CPU cores,
# the same metrics; text at K 10 (7.9 MB) was faster by rows, Delicious at K
# 25 (24 MB) whole. `launch/benchmark.py --suite=tables` measures both (its
# figures: docs/RESULTS.md).
LABELS_PER_GATHERED_ROW = 24
LABELS_PER_CACHED_ROW = 8
GATHERED_IN_CACHE_BYTES = 16 * 2**20
FEATURES_PER_NONZERO = 20


class Whole(NamedTuple):
  labels: bool    # W by one B×Y matmul
  features: bool  # V by one B×d matmul


def choose(cfg: StepConfig, batch_size: int, positives_per_row: int, num_slots: int,
           num_features: int) -> Whole:
  """Which tables this step reads whole (static: from shapes and settings):
  a batch of `batch_size` rows of `positives_per_row` pairs and `num_slots`
  feature non-zeros, a table of `num_features` visual words."""
  kind = cfg.model.tables
  if kind == 'rows' or cfg.model.score != 'dot' or cfg.optim.l2:
    return Whole(False, False)
  if kind != 'by_size':  # 'whole', 'labels' or 'features'
    return Whole(kind in ('whole', 'labels'), kind in ('whole', 'features'))
  # N feature pieces vs two B×d products (X·V, Xᵀ·∂/∂images).
  features = batch_size * num_features <= FEATURES_PER_NONZERO * num_slots
  if cfg.loss.kind == 'exact':  # every label scored either way: whole up to a chunk
    return Whole(cfg.num_labels <= cfg.loss.label_chunk, features)
  if cfg.draws_shared:
    # K shared draws scored by B×K products (wsabie/batch_draws.py) vs B×Y ones:
    # whole only where Y is no more than the drawn and positive columns.
    return Whole(cfg.num_labels <= cfg.draws_per_pair + positives_per_row, features)
  # B·(K+Q) label pieces gathered vs three B×Y products (scores, C·W, Cᵀ·images).
  pieces = cfg.draws_per_pair + positives_per_row
  in_cache = batch_size * pieces * cfg.model.dim * 4 <= GATHERED_IN_CACHE_BYTES  # (float32)
  per_row = LABELS_PER_CACHED_ROW if in_cache else LABELS_PER_GATHERED_ROW
  return Whole(cfg.num_labels <= per_row * pieces, features)


def embed(V_dxD: jax.Array, batch, batch_size: int,
          whole: bool) -> tuple[jax.Array, Callable[[jax.Array], object]]:
  """(images_BxD, grads_of): grads_of(∂/∂images_BxD) is V's update input —
  the N non-zeros' pieces (row_optim.EmbeddingPieces) or V whole (DenseGrad)."""
  # (An unjitted step is given host arrays; its pieces are indexed by tracers.)
  idx_N = jnp.asarray(batch.feat_idx_SxN).reshape(-1)
  val_N = jnp.asarray(batch.feat_val_SxN).reshape(-1)
  if not whole:
    image_BxD, row_N = model.embed_packed(V_dxD, batch, batch_size)

    # image = Σ_f x_f V_f: a row's piece is its value times its image's gradient.
    return image_BxD, lambda g_BxD: row_optim.EmbeddingPieces(idx_N, val_N, row_N, g_BxD)
  row_N = model.packed_rows(batch, batch_size)
  num_features = V_dxD.shape[0]
  X_Bxd = jnp.zeros((batch_size, num_features)).at[row_N, idx_N].add(val_N)

  def grads_of(g_BxD):
    sq_B = jnp.mean(jnp.square(g_BxD), -1)  # piece (b, f): x_f²·mean(∂/∂image_b²)
    return row_optim.DenseGrad(
        X_Bxd.T @ g_BxD, jnp.zeros((num_features,)).at[idx_N].add(jnp.square(val_N) * sq_B[row_N]),
        jnp.zeros((num_features,), bool).at[idx_N].set(True))

  return X_Bxd @ V_dxD, grads_of


def scores(W_YxD: jax.Array, image_BxD: jax.Array, label_BxQ: jax.Array, neg_BxK: jax.Array):
  """(the positives' scores B×Q, the draws' scores B×K), read off S = images·Wᵀ."""
  S_BxY = image_BxD @ W_YxD.T
  return jnp.take_along_axis(S_BxY, label_BxQ, 1), jnp.take_along_axis(S_BxY, neg_BxK, 1)


def label_grads(W_YxD: jax.Array, image_BxD: jax.Array, label_BxQ: jax.Array,
                neg_BxM: jax.Array, loss_of: Callable, pos_BxQ: jax.Array, neg_scores_BxM: jax.Array):
  """(loss, ∂/∂images_BxD, W's DenseGrad) of loss_of(positives' scores,
  negatives' scores) (step.draws_loss: eq. (9)'s weighted terms), by matmul.

  A row whose pairs drew no violator has no slope (Alg. 1 updates nothing):
  once a model fits, most rows. When at most B / row_optim.LIVE_SHARE rows
  have one, only they go through the two B×Y×D products (compacted to that
  static size, fillers with zero slopes; row_optim.on_live, as update_live):
  the same gradients."""
  loss, (slope_BxQ, slope_BxM) = jax.value_and_grad(loss_of, (0, 1))(pos_BxQ, neg_scores_BxM)
  args = (W_YxD, image_BxD, label_BxQ, neg_BxM, slope_BxQ, slope_BxM)
  live_B = jnp.any(slope_BxQ != 0, 1) | jnp.any(slope_BxM != 0, 1)

  def live(sel_C, kept_C, W_YxD, image_BxD, label_BxQ, neg_BxM, slope_BxQ, slope_BxM):
    kept_Cx1 = kept_C[:, None]
    g_image_CxD, W_grad = _slope_grads(W_YxD, image_BxD[sel_C], label_BxQ[sel_C], neg_BxM[sel_C],
                                       jnp.where(kept_Cx1, slope_BxQ[sel_C], 0),
                                       jnp.where(kept_Cx1, slope_BxM[sel_C], 0))
    return jnp.zeros_like(image_BxD).at[sel_C].add(g_image_CxD), W_grad  # (a filler adds 0)

  return loss, *row_optim.on_live(live_B, (label_BxQ.shape[0] // row_optim.LIVE_SHARE,), live,
                                  _slope_grads, *args)


def _slope_grads(W_YxD: jax.Array, image_BxD: jax.Array, label_BxQ: jax.Array, neg_BxM: jax.Array,
                 slope_BxQ: jax.Array, slope_BxM: jax.Array):
  """(∂/∂images_BxD, W's DenseGrad) of the loss's slopes on the rows'
  positives' and negatives' scores: C (B×Y) holds them, ∂/∂images = C·W and
  ∂/∂W = Cᵀ·images; a label's Adagrad piece (b, y) is slope²·mean(image_b²).
  The labels a row names are touched even with no slope (a zero step; their
  rows are in the ball, so projecting them changes nothing)."""
  B, Y = label_BxQ.shape[0], W_YxD.shape[0]
  row_Bx1 = jnp.arange(B)[:, None]
  C_BxY = jnp.zeros((B, Y)).at[row_Bx1, label_BxQ].add(slope_BxQ).at[row_Bx1, neg_BxM].add(slope_BxM)
  sq_Bx1 = jnp.mean(jnp.square(image_BxD), -1, keepdims=True)
  sq_Y = (jnp.zeros((Y,)).at[label_BxQ].add(jnp.square(slope_BxQ) * sq_Bx1)
          .at[neg_BxM].add(jnp.square(slope_BxM) * sq_Bx1))
  touched_Y = jnp.zeros((Y,), bool).at[label_BxQ].set(True).at[neg_BxM].set(True)
  return C_BxY @ W_YxD, row_optim.DenseGrad(C_BxY.T @ image_BxD, sq_Y, touched_Y)


def exact_label_grads(W_YxD: jax.Array, image_BxD: jax.Array, label_BxQ: jax.Array,
                      weight_BxQ: jax.Array, pos_BxP: jax.Array, *, rank_weights: str,
                      margin: float):
  """(loss, ∂/∂images_BxD, W's DenseGrad) of eq. (6) with the exact rank (7)
  for every pair (b, q): each of its r violators ȳ weighed L(r)/r, read off
  S = images·Wᵀ (warp.exact_rank_loss, by matmul). The rank is a count: not
  differentiated. A row's slopes on label y, summed over its Q pairs, are one
  piece of W_y (Adagrad: slope²·mean(image_b²)). Also each pair's rank
  (its count of violators, B×Q)."""
  Y = W_YxD.shape[0]
  B, Q = label_BxQ.shape
  row_Bx1 = jnp.arange(B)[:, None]
  S_BxY = image_BxD @ W_YxD.T
  pos_BxQ = jnp.take_along_axis(S_BxY, label_BxQ, 1)
  # The image's own positives never violate: their scores −∞ here (pos_BxP's
  # padding, Y, is dropped).
  negative_BxY = S_BxY.at[row_Bx1, pos_BxP].set(-jnp.inf, mode='drop')
  lead_BxQ = margin - pos_BxQ  # ȳ violates pair (b, q) where lead + f_ȳ > 0 (warp.hinge's sum)

  def violates(q0, q1, y0, y1):  # pairs q0:q1 against labels y0:y1, B×(q1−q0)×(y1−y0)
    return lead_BxQ[:, q0:q1, None] + negative_BxY[:, None, y0:y1] > 0

  # Both sums over the B×Q×Y comparison are made without it (core/lane_sums.py).
  rank_BxQ = lane_sums.sum_along(lambda y0, y1: violates(0, Q, y0, y1).astype(jnp.int32), Y,
                                 axis=2, width=32)
  w_BxQ = weight_BxQ * warp.rank_loss(rank_BxQ, Y, rank_weights) / jnp.maximum(rank_BxQ, 1)
  # ∂loss/∂S: +w on each violator's score, −w·r on the positive's.
  C_BxY = lane_sums.sum_along(
      lambda q0, q1: jnp.where(violates(q0, q1, 0, Y), w_BxQ[:, q0:q1, None], 0.0), Q,
      axis=1, width=1).at[row_Bx1, label_BxQ].add(-w_BxQ * rank_BxQ)
  # Σ w·Σ_viol (margin − f_y + f_ȳ) = Σ C·S + margin·Σ w·r: a B×Y sum, not B×Q×Y.
  loss = jnp.sum(C_BxY * S_BxY) + margin * jnp.sum(w_BxQ * rank_BxQ)
  sq_Y = jnp.square(C_BxY).T @ jnp.mean(jnp.square(image_BxD), -1)
  return (loss, C_BxY @ W_YxD,
          row_optim.DenseGrad(C_BxY.T @ image_BxD, sq_Y, jnp.any(C_BxY != 0, 0)), rank_BxQ)

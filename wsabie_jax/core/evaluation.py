"""Evaluates a ranking model over a padded data set with the exact metrics."""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import metrics
from wsabie_jax.core import model
from wsabie_jax.data import packing
from wsabie_jax.data.batching import PaddedImages, eval_batches
from wsabie_jax.core import precision


def dense_rows(feat_idx_BxF: jax.Array, feat_val_BxF: jax.Array, num_features: int) -> jax.Array:
  """B×d: padded sparse rows written out dense (padding adds its value 0 to
  feature 0). For scorers that multiply whole rows (k-NN, the kernel member),
  where gathering a table's rows by feature id would hold B×F×(its width)."""
  rows_Bx1 = jnp.arange(feat_idx_BxF.shape[0])[:, None]
  return jnp.zeros((feat_idx_BxF.shape[0], num_features),
                   feat_val_BxF.dtype).at[rows_Bx1, feat_idx_BxF].add(feat_val_BxF)


# Rows at least 1/DENSE_AT of the table's height wide are multiplied written
# out dense (rows_times): gathering the table's rows by feature id holds
# B×F×K floats, which past a few MB costs more than the whole product.
# `launch/benchmark.py --suite=eval` times both at B 256 (2 CPU cores, two
# runs; gathered ÷ dense): d 501, K 128 (Delicious' V) at F 256, 22-30×; K 983
# (its linear member) at F 256, 50-83×, at F 16 (d/F 31), 1.8-2.7×; d 11,975,
# K 433 (debtags' member) at F 256 (d/F 47), 4.4-4.8×, at F 64 (d/F 187),
# 0.42-0.45×; d 1,450, K 128 at F 64 (d/F 23), 0.92-1.09×, at F 16 (d/F
# 91), 0.37-0.46×: the rule takes the faster form, or one within 10%, in each.
DENSE_AT = 64


def written_out_dense(num_features: int, width: int) -> bool:
  """Whether rows_times writes rows `width` wide out dense against a table of
  `num_features` rows (DENSE_AT)."""
  return num_features <= DENSE_AT * width


def rows_times(T_dxK: jax.Array, feat_idx_BxF: jax.Array, feat_val_BxF: jax.Array,
               dense: bool | None = None) -> jax.Array:
  """x·T (B×K) for padded sparse rows x (padding: value 0), written out dense
  or T's rows gathered: by their width (DENSE_AT; static shapes, so chosen as
  it is traced) unless `dense` says (the benchmark's two columns)."""
  if dense is None:
    dense = written_out_dense(T_dxK.shape[0], feat_idx_BxF.shape[1])
  if dense:
    return dense_rows(feat_idx_BxF, feat_val_BxF, T_dxK.shape[0]) @ T_dxK
  return model.embed_images(T_dxK[feat_idx_BxF], feat_val_BxF)


@jax.jit
@precision.full_float32
def embed(V_dxD: jax.Array, feat_idx_BxF: jax.Array, feat_val_BxF: jax.Array) -> jax.Array:
  """Φ_I(x) = V x for evaluation's padded rows."""
  return rows_times(V_dxD, feat_idx_BxF, feat_val_BxF)


@precision.full_float32
def evaluate_ranking(embed_fn: Callable, W_YxD: jax.Array | None, padded: PaddedImages, *,
                     score: str = 'dot', ks=(1, 5, 10), batch_size: int = 256,
                     chunk: int = 4096, label_parents: np.ndarray | None = None,
                     limit: int | None = None, f1_k: int = 5,
                     num_labels: int | None = None) -> dict[str, float]:
  """Means over images of the per-image metrics, plus per-class/overall P/R/F1@f1_k.

  embed_fn(feat_idx_BxF, feat_val_BxF) -> image_BxD; labels are ranked by
  score(image, W_i) over all Y labels. With W_YxD None, embed_fn returns the
  B×Y label scores themselves (baselines, ensembles; pass num_labels).
  """
  num_labels = W_YxD.shape[0] if W_YxD is not None else num_labels
  kmax = _places_needed(ks, f1_k, num_labels)
  if W_YxD is not None:
    metrics.require_finite(W_YxD, 'label embeddings')

  def rank(feat_idx, feat_val, pos, known):
    image = embed_fn(feat_idx, feat_val)
    metrics.require_finite(image, 'image embeddings' if W_YxD is not None else 'label scores')
    if W_YxD is None:
      if known is not None:
        raise ValueError('leave-one-out evaluation needs the label table (W_YxD)')
      ranks, top, _ = jax.device_get(metrics.rank_and_top_k_from_scores(
          image, jnp.asarray(pos), k=kmax))
    else:
      ranks, top, _ = jax.device_get(metrics.rank_and_top_k(
          image, W_YxD, jnp.asarray(pos), k=kmax, score_kind=score, chunk=chunk,
          known_BxE=None if known is None else jnp.asarray(known)))
    return ranks, top

  return _summarise(rank, padded, num_labels, ks=ks, batch_size=batch_size,
                    label_parents=label_parents, limit=limit, f1_k=f1_k)


def _places_needed(ks, f1_k: int, num_labels: int) -> int:
  """How many top places the metrics read: the largest k of p@k / r@k and F1's."""
  return min(max(max(ks), f1_k), num_labels)


def _summarise(rank: Callable, padded: PaddedImages, num_labels: int, *, ks, batch_size: int,
               label_parents, limit, f1_k: int) -> dict[str, float]:
  """The metrics of `rank(feat_idx_BxF, feat_val_BxF, pos_BxP, known_BxE | None)`
  -> (ranks_BxP, top_Bxk) in numpy, over `padded`'s evaluation batches."""
  sums: dict[str, float] = {}
  counts = metrics.ClassCounts(num_labels)
  num_images = 0
  for feat_idx, feat_val, pos, real, known, _ in eval_batches(padded, batch_size, limit):
    ranks, top = rank(feat_idx, feat_val, pos, known)
    ranks, top, pos = ranks[:real], top[:real], pos[:real]
    num_known = None if known is None else np.sum(known[:real] < num_labels, axis=1)
    per_image = metrics.per_image_metrics(ranks, top, num_labels, ks, label_parents, pos,
                                          num_known)
    for name, values in per_image.items():
      sums[name] = sums.get(name, 0.0) + float(values.sum())
    counts.add(top[:, :f1_k], pos)
    num_images += real
  out = {('map' if name == 'ap' else name): total / max(num_images, 1)
         for name, total in sums.items()}
  out.update(counts.summary(f1_k))
  out['num_images'] = num_images
  return out


def evaluate_params(params: model.Params, padded: PaddedImages, **kw) -> dict[str, float]:
  return evaluate_ranking(lambda i, v: embed(params.V_dxD, i, v), params.W_YxD, padded, **kw)


def evaluate_frequency_baseline(label_counts_Y: np.ndarray, padded: PaddedImages, *,
                                ks=(1, 5, 10), batch_size: int = 256,
                                label_parents: np.ndarray | None = None,
                                limit: int | None = None, f1_k: int = 5,
                                **_scoring) -> dict[str, float]:
  """Always predicts the most frequent training labels (the papers' sanity
  check): every image ranks the labels by count, ties by label id, as
  `evaluate_ranking` ranks equal scores. One order for every image, so it is
  ranked here in numpy: through the device it would compile a scorer and
  finiteness checks for shapes used nowhere else. Leave-one-out `known` labels are skipped over;
  `_scoring` takes evaluate_ranking's score and chunk (nothing is scored)."""
  num_labels = len(label_counts_Y)
  kmax = _places_needed(ks, f1_k, num_labels)
  order_Y = np.argsort(-np.asarray(label_counts_Y, np.float64), kind='stable')
  place_Y = np.empty(num_labels, np.int64)
  place_Y[order_Y] = np.arange(num_labels)

  def place(ids):  # a label's place in the order; ids outside [0, Y) (padding) go last
    ok = (ids >= 0) & (ids < num_labels)
    return np.where(ok, place_Y[np.where(ok, ids, 0)], num_labels), ok

  def rank(feat_idx, feat_val, pos_BxP, known_BxE):
    pos_place_BxP, valid_BxP = place(pos_BxP)
    if known_BxE is None:
      ranks_BxP = pos_place_BxP
      top_Bxk = np.broadcast_to(order_Y[:kmax], (len(pos_BxP), kmax))
    else:  # the known labels ahead of a positive do not count; none is predicted
      known_place_BxE, _ = place(known_BxE)
      ranks_BxP = pos_place_BxP - np.sum(
          known_place_BxE[:, None, :] < pos_place_BxP[:, :, None], axis=-1)
      C = min(kmax + known_BxE.shape[1], num_labels)  # the first C places hold k unknown
      known_BxC = np.zeros((len(pos_BxP), C + 1), bool)  # by place; the last: places past C
      np.put_along_axis(known_BxC, np.minimum(known_place_BxE, C), True, axis=1)
      known_BxC = known_BxC[:, :C]
      first_Bxk = np.argsort(known_BxC, axis=1, kind='stable')[:, :kmax]  # the unknown, in order
      top_Bxk = np.where(np.take_along_axis(known_BxC, first_Bxk, 1), num_labels,  # none left
                         order_Y[first_Bxk])
    return np.where(valid_BxP, ranks_BxP, -1).astype(np.int32), np.asarray(top_Bxk)

  return _summarise(rank, padded, num_labels, ks=ks, batch_size=batch_size,
                    label_parents=label_parents, limit=limit, f1_k=f1_k)


@functools.partial(jax.jit, static_argnames='score')
@precision.full_float32
def _draws_needed(V_dxD, W_YxD, batch, margin, score):
  label_B, pos_BxP, num_pos_B = batch.label_BxQ[:, 0], batch.pos_BxP, batch.num_pos_B
  image_BxD, _ = model.embed_packed(V_dxD, packing.from_padded(batch), len(label_B))
  scores_BxY = model.score_all(image_BxD, W_YxD, score)
  pos_score_B = jnp.take_along_axis(scores_BxY, label_B[:, None], 1)
  is_pos_BxY = jnp.zeros(scores_BxY.shape, bool).at[jnp.arange(len(label_B))[:, None], pos_BxP].set(
      True, mode='drop')
  violators_B = jnp.sum((scores_BxY > pos_score_B - margin) & ~is_pos_BxY, axis=1)
  negatives_B = (W_YxD.shape[0] - num_pos_B).astype(jnp.float32)
  p_B = violators_B / negatives_B
  # Alg. 1 draws until a violator or Y−|P| trials: E[min(Geometric(p), M)] = (1 − (1−p)^M)/p.
  expected_B = jnp.where(violators_B > 0, -jnp.expm1(negatives_B * jnp.log1p(-p_B)) / p_B,
                         negatives_B)
  return expected_B, violators_B > 0


def uniform_draws_needed(params: model.Params, batch: dict, margin: float = 1.0,
                         score: str = 'dot') -> dict:
  """Paper 003 Fig. 1: the draws sequential uniform WARP needs per update, exactly.

  For each training pair, every label is scored (dot) to count its violators v
  among the M = Y−|P| negatives; Alg. 1's expected number of draws is then
  E[min(Geometric(v/M), M)]. Returns the mean per pair, per update (pairs with
  v > 0) and the fraction of pairs with a violator.
  """
  expected_B, found_B = jax.device_get(_draws_needed(
      params.V_dxD, params.W_YxD, batch, margin, score))
  return {'draws_per_pair': float(expected_B.mean()),
          'draws_per_update': float(expected_B[found_B].mean()) if found_B.any() else float('nan'),
          'violating_fraction': float(found_B.mean())}

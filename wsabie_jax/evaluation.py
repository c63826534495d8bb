"""Evaluates a ranking model over a padded data set with the exact metrics."""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax import metrics, model
from wsabie_jax.data.batching import PaddedImages, eval_batches


@jax.jit
def embed(V_dxD: jax.Array, feat_idx_BxF: jax.Array, feat_val_BxF: jax.Array) -> jax.Array:
  return model.embed_images(V_dxD[feat_idx_BxF], feat_val_BxF)


def evaluate_ranking(embed_fn: Callable, W_YxD: jax.Array, padded: PaddedImages, *,
                     score: str = 'dot', ks=(1, 5, 10), batch_size: int = 256,
                     chunk: int = 4096, label_parents: np.ndarray | None = None,
                     limit: int | None = None, f1_k: int = 5) -> dict[str, float]:
  """Means over images of the per-image metrics, plus per-class/overall P/R/F1@f1_k.

  embed_fn(feat_idx_BxF, feat_val_BxF) -> image_BxD; labels are ranked by
  score(image, W_i) over all Y labels.
  """
  num_labels = W_YxD.shape[0]
  kmax = min(max(max(ks), f1_k), num_labels)
  sums: dict[str, float] = {}
  counts = metrics.ClassCounts(num_labels)
  num_images = 0
  for feat_idx, feat_val, pos, real in eval_batches(padded, batch_size, limit):
    image = embed_fn(feat_idx, feat_val)
    ranks, top, _ = jax.device_get(metrics.rank_and_top_k(
        image, W_YxD, jnp.asarray(pos), k=kmax, score_kind=score, chunk=chunk))
    ranks, top, pos = ranks[:real], top[:real], pos[:real]
    per_image = metrics.per_image_metrics(ranks, top, num_labels, ks, label_parents, pos)
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


def evaluate_frequency_baseline(label_counts_Y: np.ndarray, padded: PaddedImages,
                                **kw) -> dict[str, float]:
  """Always predicts the most frequent training labels (the papers' sanity check)."""
  W = jnp.asarray(label_counts_Y, jnp.float32)[:, None]
  return evaluate_ranking(lambda i, v: jnp.ones((i.shape[0], 1)), W, padded,
                          **dict(kw, score='dot'))

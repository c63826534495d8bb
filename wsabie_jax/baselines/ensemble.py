"""Ensembles of annotation models (paper 000 Table 7): Σ_m λ_m f^m(x), weights on validation.

Each member is a score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y (e.g. WSABIE models
of different D, `wsabie_scores`). λ_1 = 1 (a ranking does not change when all
weights scale), the others by grid search on a validation metric.
"""
from __future__ import annotations

import functools
import itertools
from typing import Callable, Sequence

import jax

from wsabie_jax.core import evaluation
from wsabie_jax.core import model


def wsabie_scores(params: model.Params, score: str = 'dot') -> Callable:
  # The tables arguments of one program (closed over by a function jitted
  # here, they would be constants of a new program per model).
  return functools.partial(_wsabie_scores, *params, score=score)


@functools.partial(jax.jit, static_argnames=('score',))
def _wsabie_scores(V_dxD, W_YxD, feat_idx_BxF, feat_val_BxF, *, score: str):
  return model.score_all(evaluation.embed(V_dxD, feat_idx_BxF, feat_val_BxF), W_YxD, score)


def combine(members: Sequence[Callable], weights: Sequence[float]) -> Callable:
  return lambda idx, val: sum(w * f(idx, val) for f, w in zip(members, weights) if w)


def fit_weights(members: Sequence[Callable], padded_valid, num_labels: int,
                grid=(0.0, 0.25, 0.5, 1.0, 2.0, 4.0), metric: str = 'p@1', **eval_kw):
  """(weights, validation metric) maximising `metric` over λ_1 = 1, λ_m>1 ∈ grid."""
  best = (None, -1.0)
  for rest in itertools.product(grid, repeat=len(members) - 1):
    weights = (1.0,) + rest
    got = evaluation.evaluate_ranking(combine(members, weights), None, padded_valid,
                                      num_labels=num_labels, **eval_kw)[metric]
    if got > best[1]:
      best = (weights, got)
  return best


def scale_free(score_fn: Callable) -> Callable:
  """Scores standardised per image (zero mean, unit variance over labels), so
  members of different scales weigh in as their λ says."""
  return lambda idx, val: standardised(score_fn(idx, val))


def standardised(scores_BxY: jax.Array) -> jax.Array:
  return ((scores_BxY - scores_BxY.mean(1, keepdims=True))
          / (scores_BxY.std(1, keepdims=True) + 1e-6))



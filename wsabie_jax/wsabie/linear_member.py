"""Paper 000 Table 7's ensemble as a trained configuration: WSABIE with the
paper's One-vs-Rest linear model (§6.3, baselines/linear.py) beside it
(model.ensemble='one_vs_rest').

  f(x) = z(f_WSABIE(x)) + λ · z(f_OvR(x)),  z: standardised over the labels per image

The two rank differently: WSABIE through a rank-D map shared by the labels,
One-vs-Rest with a full-rank row a label (d×Y weights). Table 7 combines models
"with weights chosen on the validation set using grid search"; here λ comes
from WEIGHTS by the run's selection metric, with WSABIE's best state (the one
that never saw the validation split), and λ = 0 keeps WSABIE alone. The member
trains on the same training split before WSABIE's steps, in seconds that
count in the run's budget (docs/RESULTS.md "The One-vs-Rest member"), and is
saved beside the checkpoints (`FILE`: its d×Y weights and λ), where evaluate
and annotate read it.
"""
from __future__ import annotations

import logging
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.baselines import ensemble, linear
from wsabie_jax.core import evaluation

log = logging.getLogger('wsabie_jax')

FILE = 'one_vs_rest.npz'
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)  # λ's grid (0: WSABIE alone)
# 'auto' trains the member where its table fits this many floats (256 MiB), the
# labels are few enough that evaluation may score them as a Y×Y identity, and
# the score is the dot product it standardises.
MAX_TABLE_FLOATS = 2 ** 26
MAX_LABELS = 4096


def fits(num_features: int, num_labels: int, score: str) -> bool:
  """Whether 'auto' adds the member on data of these sizes."""
  return num_features * num_labels <= MAX_TABLE_FLOATS and num_labels <= MAX_LABELS and score == 'dot'


def train(train_ds, C: float, epochs: int, seed: int) -> np.ndarray:
  """The member's weights U (d×Y) on the training split: PA-I's W averaged over
  the ends of its second half of epochs (alone on debtags' validation split:
  MAP 0.8451 against the last W's 0.8410)."""
  return np.asarray(jax.device_get(linear.train_linear(train_ds, 'ovr', C=C, epochs=epochs,
                                                       seed=seed, average=True)))


def combined(wsabie_scorer, U_dxY, weight: float):
  """The ensemble as the (embed_fn, labels) pair evaluation and annotation rank
  with: an image's "embedding" is its Y combined scores, the labels the
  identity (dot scores read them back). λ = 0: WSABIE's own scorer."""
  if not weight:
    return wsabie_scorer
  embed, W_YxD = wsabie_scorer
  U = jnp.asarray(U_dxY)
  ours = ensemble.scale_free(lambda i, v: embed(i, v) @ W_YxD.T)
  theirs = ensemble.scale_free(linear.linear_scores(U))
  scores = jax.jit(lambda i, v: ours(i, v) + weight * theirs(i, v))
  return scores, jnp.eye(W_YxD.shape[0], dtype=jnp.float32)


def choose(wsabie_scorer, U_dxY, padded_valid, metric: str, eval_kw: dict) -> tuple[float, dict]:
  """(λ, {λ: validation metrics}): the weight of WEIGHTS whose ensemble scores
  best on `metric` on the validation split (the first of equals: the smaller λ)."""
  got = {w: evaluation.evaluate_ranking(*combined(wsabie_scorer, U_dxY, w), padded_valid,
                                        **eval_kw) for w in WEIGHTS}
  weight = max(got, key=lambda w: (got[w][metric], -w))
  log.info('model.ensemble: valid %s by the One-vs-Rest member\'s weight λ: %s; λ = %g', metric,
           ', '.join(f'{w:g} {m[metric]:.4f}' for w, m in got.items()), weight)
  return weight, got


def save(workdir, U_dxY, weight: float) -> None:
  """`FILE` in workdir, written whole or not at all (a rename)."""
  path = pathlib.Path(workdir) / FILE
  part = path.with_suffix('.part.npz')
  np.savez(part, U_dxY=U_dxY, weight=np.float32(weight))
  os.replace(part, path)


def load(workdir) -> dict | None:
  """The saved member ({'U_dxY', 'weight'}), or None where the run has none.
  (A damaged file fails its zip checksums: an error naming it.)"""
  path = pathlib.Path(workdir) / FILE
  if not path.exists():
    return None
  try:
    with np.load(path) as got:
      return {'U_dxY': got['U_dxY'], 'weight': float(got['weight'])}
  except Exception as error:  # (zipfile.BadZipFile, ValueError, KeyError, OSError)
    raise ValueError(f'{path}: the One-vs-Rest member cannot be read ({error}); train the '
                     'run again, or delete the file to use WSABIE alone') from None

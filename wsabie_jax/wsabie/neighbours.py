"""The training images nearest an image in WSABIE's own embedding space, and
the labels they hold, as one more term of the run's ensemble.

WSABIE maps an image to Φ_I(x) = V x (paper 000 eq. (1)) and ranks the labels
by their dot product with it. The same map places images near images: an
image's k nearest training images by the cosine of their embeddings vote for
their labels,

    s_y(x) = Σ_{j ∈ N_k(x)} max(cos(Vx, Vx_j), 0)^4 · [y ∈ Y_j],

a local, per-region reading of the space where W's rows give one global
reading (SLEEC's k-NN over a learnt embedding, Bhatia et al. 2015, reads its
labels the same way); the fourth power lets the nearest weigh most (over the
folds below it gained more than the cosine itself on Delicious, +0.014
against +0.010 p@1 at μ 0.5, and as much elsewhere). The run adds it last, to the ensemble it tests:
z(ensemble) + μ · z(s), z standardising an image's scores over the labels
(as linear_member's members are summed), μ chosen on the validation split
from WEIGHTS (0: the term off) with the split's training images as the
neighbours; the tested model reads the images its own state trained on (the
whole training file after a refit). Five folds of each training file:
docs/RESULTS.md "The neighbours term".

An image reads every training image (a B×n product): the term is for
training sets of up to MAX_IMAGES images ('auto').
"""
from __future__ import annotations

import functools
import logging
import pathlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.baselines import ensemble
from wsabie_jax.core import evaluation, precision
from wsabie_jax.data import batching
from wsabie_jax.training import saved_arrays

log = logging.getLogger('wsabie_jax')

FILE = 'neighbours.npz'
K = 30  # neighbours an image reads
POWER = 4  # a neighbour's vote: its cosine to this power
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)  # μ's grid (0: the ensemble alone)
# 'auto' turns the term on for training splits of more than MIN_IMAGES images
# (a vote of K among fewer reads a tenth of the set or more: on medical's
# folds, 266 training images, it lost 0.015 p@1 or more at every k and μ)
# and at most MAX_IMAGES (an image batch's scores are B×n: debtags' 21,500
# are 5.5M floats at B 256); the validation split weighs it, 0 included.
MIN_IMAGES = 10 * K
MAX_IMAGES = 65536
EMBED_ROWS = 4096  # training images embedded at a time


class Neighbours(NamedTuple):
  images_nxD: np.ndarray  # float32 unit-norm embeddings Vx_j/‖Vx_j‖ of the training images
  pos_nxP: np.ndarray     # int32 their labels, padded with Y


def auto(num_images: int, score: str) -> int:
  """model.neighbours 'auto': K where the training split's size suits the
  term (MIN_IMAGES … MAX_IMAGES) and labels rank by the dot product, else 0."""
  return K if MIN_IMAGES < num_images <= MAX_IMAGES and score == 'dot' else 0


def index(V_dxD, train) -> Neighbours:
  """The unit embeddings of `train`'s images (a SparseDataset) under V, and
  their labels; padded EMBED_ROWS at a time to one shape (one program)."""
  n = train.num_images
  F = max(int(np.diff(train.feat_indptr).max(initial=1)), 1)
  P = max(int(np.diff(train.label_indptr).max(initial=1)), 1)
  images, labels = [], []
  for start in range(0, n, EMBED_ROWS):
    part = batching.pad_images(train.subset(np.arange(start, min(start + EMBED_ROWS, n))), F, P)
    images.append(np.asarray(_unit(evaluation.embed(V_dxD, part.feat_idx_nxF,
                                                      part.feat_val_nxF))))
    labels.append(part.pos_nxP)
  if not images:
    return Neighbours(np.zeros((0, V_dxD.shape[1]), np.float32), np.zeros((0, P), np.int32))
  return Neighbours(np.concatenate(images), np.concatenate(labels).astype(np.int32))


@jax.jit
def _unit(images_BxD):
  return images_BxD / jnp.maximum(jnp.linalg.norm(images_BxD, axis=1, keepdims=True), 1e-12)


@functools.partial(jax.jit, static_argnames=('k', 'num_labels', 'power'))
@precision.full_float32
def votes(images_BxD, images_nxD, pos_nxP, k: int, num_labels: int, power: int = POWER):
  """B×Y: s_y of each image (module docstring) over its k nearest of the
  training images (`index`'s arrays; padding labels, id Y, dropped), a vote
  its cosine to `power`."""
  sims_Bxn = _unit(images_BxD) @ images_nxD.T
  sims_Bxk, nearest_Bxk = jax.lax.top_k(sims_Bxn, min(k, images_nxD.shape[0]))
  labels_BxkxP = pos_nxP[nearest_Bxk]
  weights_BxkxP = jnp.broadcast_to(jnp.maximum(sims_Bxk, 0.0)[..., None] ** power,
                                   labels_BxkxP.shape)
  rows_B = jnp.arange(images_BxD.shape[0])[:, None, None]
  return jnp.zeros((images_BxD.shape[0], num_labels), jnp.float32).at[
      rows_B, labels_BxkxP].add(weights_BxkxP, mode='drop')


@jax.jit
def _summed(ensemble_BxY, votes_BxY, weight):
  """z(ensemble) + μ · z(s)."""
  return ensemble.standardised(ensemble_BxY) + weight * ensemble.standardised(votes_BxY)


def combined(scorer, embed_fn, neighbours: Neighbours, k: int, weight: float,
             power: int = POWER):
  """The (embed_fn, labels) pair evaluation ranks with: `scorer`'s (the
  ensemble's pair) scores with the neighbours' votes at μ = `weight`, an
  image's neighbours found by WSABIE's `embed_fn`; μ 0: `scorer` itself. The
  arrays are the programs' arguments (one program for every μ and state)."""
  if not weight:
    return scorer
  own_embed, labels_YxD = scorer
  num_labels = labels_YxD.shape[0]
  images_nxD, pos_nxP = jnp.asarray(neighbours.images_nxD), jnp.asarray(neighbours.pos_nxP)
  weight_ = jnp.float32(weight)

  def scores(i, v):
    return _summed(own_embed(i, v) @ labels_YxD.T,
                   votes(embed_fn(i, v), images_nxD, pos_nxP, k, num_labels, power), weight_)
  return scores, jnp.eye(num_labels, dtype=jnp.float32)


def choose(scorer, embed_fn, neighbours: Neighbours, k: int, padded_valid, metric: str,
           eval_kw: dict) -> tuple[float, dict]:
  """(μ, {μ: validation metrics}): the weight of WEIGHTS whose sum scores best
  on `metric` on the validation split (of equals, the smaller)."""
  got = {w: evaluation.evaluate_ranking(*combined(scorer, embed_fn, neighbours, k, w),
                                        padded_valid, **eval_kw) for w in WEIGHTS}
  weight = max(WEIGHTS, key=lambda w: (got[w][metric], -w))
  log.info('model.neighbours: valid %s by the weight μ of %d nearest training images\' labels: '
           '%s; chose μ %g', metric, k, ', '.join(f'{w:g} {m[metric]:.4f}' for w, m in got.items()),
           weight)
  return weight, got


def save(workdir, neighbours: Neighbours | None, weight: float, k: int) -> None:
  """`FILE` in workdir, written whole or not at all (a rename); μ = 0 keeps
  the choice, not the arrays."""
  if not weight or neighbours is None:
    neighbours, weight = Neighbours(np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int32)), 0.0
  saved_arrays.write(pathlib.Path(workdir) / FILE, **neighbours._asdict(),
                           weight=np.float32(weight), k=np.int32(k))


def load(workdir) -> dict | None:
  """The saved term ({'neighbours', 'weight', 'k'}), or None where the run
  has none. A damaged file is an error naming it."""
  read = lambda got: {'neighbours': Neighbours(*(got[f] for f in Neighbours._fields)),
                      'weight': float(got['weight']), 'k': int(got['k'])}
  return saved_arrays.read(pathlib.Path(workdir) / FILE, 'the neighbours term',
                                 'train the run again, or delete the file to test the model '
                                 'without it', read)

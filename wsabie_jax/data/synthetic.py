"""The embedded default data: a planted multi-label image annotation world.

docs/DESIGN.md §3. Labels sit in a two-level hierarchy (parent groups → labels, so the
sibling matrix is known), have Zipf frequencies, and each owns a pool of
visual words partly shared with its siblings. An image picks labels (a Zipf
head, then siblings or further Zipf draws), then a bag of visual words: each
word comes from one of its labels' pools with probability `signal`, else from
a Zipf background. Deterministic per seed; images are generated shard by
shard (each shard its own stream), so any size can be written piecewise.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from wsabie_jax.data.dataset import SparseDataset


@dataclasses.dataclass(frozen=True)
class SyntheticSpec:
  num_labels: int = 1000
  num_features: int = 5000
  nnz: int = 40               # mean number of visual-word draws per image
  nnz_spread: float = 0.0     # 0: Poisson(nnz) draws; > 0: log-normal with this σ and
                              # mean nnz: a long tail, as documents' lengths have
                              # (σ 1.5: the longest of 24k rows ~60× the mean)
  mean_labels: float = 2.0    # mean labels per image (1 + Poisson)
  max_labels: int = 8
  group_size: int = 8         # labels per parent: siblings for psib@k
  zipf: float = 1.0           # label and background-word frequency exponent
  signal: float = 0.5         # fraction of words drawn from the image's labels
  words_per_label: int = 16   # size of each label's (and each group's) word pool
  sibling_share: float = 0.5  # chance a label's word comes from its group's pool
  sibling_labels: float = 0.5  # chance an extra label is a sibling of the first
  seed: int = 0
  vocabulary: str = 'planted'  # 'wordnet': labels are real noun synsets, groups their
                               # is-a parents, with WordNet's part-of relations among them


@dataclasses.dataclass(frozen=True)
class World:
  parent_Y: np.ndarray          # parent group of each label
  label_prob_Y: np.ndarray      # Zipf label frequencies
  own_words_YxW: np.ndarray     # each label's own word pool
  group_words_GxW: np.ndarray   # each group's shared word pool
  background_prob_d: np.ndarray
  members_G: np.ndarray         # labels sorted by group ...
  group_start_G: np.ndarray     # ... and where each group's run starts
  label_names: tuple[str, ...] = ()
  label_parents_YxG: np.ndarray | None = None  # all is-a parents (−1 padded)
  relations: tuple[tuple[int, int], ...] = ()  # part-of (whole, part) label pairs


class Vocabulary(NamedTuple):
  """Real label names for vocabulary='wordnet' (data/wordnet.py makes one)."""
  names: list[str]
  parents_YxG: np.ndarray       # every is-a parent of each label, −1 padded
  relations: list[tuple[int, int]]  # part-of (whole, part) label pairs


def make_world(spec: SyntheticSpec, vocabulary: Vocabulary | None = None) -> World:
  rng = np.random.default_rng([spec.seed, 0])
  Y, d = spec.num_labels, spec.num_features
  if spec.vocabulary == 'wordnet':
    # Real synsets: a label's group (the pool of visual words it shares) is
    # its first is-a parent, so WordNet siblings look alike.
    if vocabulary is None or len(vocabulary.names) != Y:
      raise ValueError("synthetic vocabulary='wordnet' needs the Y synsets given as `vocabulary` "
                       '(data.synthetic_vocabulary; data.load_splits does it)')
    names, parents_YxG, relations = vocabulary
    _, parent = np.unique(parents_YxG[:, 0], return_inverse=True)
    extra = dict(label_names=tuple(names), label_parents_YxG=parents_YxG,
                 relations=tuple(relations))
  elif spec.vocabulary == 'planted':
    parent = rng.permutation(Y) // spec.group_size
    names = tuple(f'g{g}_l{y}' for y, g in enumerate(parent))
    extra = dict(label_names=names, label_parents_YxG=parent[:, None].astype(np.int32))
  else:
    raise ValueError(f"vocabulary={spec.vocabulary!r} is not 'planted' or 'wordnet'")
  label_prob = 1.0 / np.arange(1, Y + 1) ** spec.zipf
  label_prob = (label_prob / label_prob.sum())[rng.permutation(Y)]
  bg = 1.0 / np.arange(1, d + 1) ** spec.zipf
  num_groups = int(parent.max()) + 1
  group_start = np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=num_groups))])
  return World(parent, label_prob,
               rng.integers(0, d, (Y, spec.words_per_label)),
               rng.integers(0, d, (num_groups, spec.words_per_label)),
               (bg / bg.sum())[rng.permutation(d)], np.argsort(parent, kind='stable'), group_start,
               **extra)


def _pick(rng, prob, size):
  return np.minimum(np.searchsorted(np.cumsum(prob), rng.random(size)), len(prob) - 1)


_SPLIT_STREAM = {'train': 1, 'test': 2, 'valid': 3}


def generate(spec: SyntheticSpec, num_images: int, split: str = 'train', shard: int = 0,
             world: World | None = None) -> SparseDataset:
  """Images of one shard of one split ('train', 'test', ...), as a SparseDataset."""
  world = world or make_world(spec)
  if split not in _SPLIT_STREAM:
    raise ValueError(f'split {split!r} is not one of {tuple(_SPLIT_STREAM)}')
  rng = np.random.default_rng([spec.seed, _SPLIT_STREAM[split], shard])
  n = num_images
  # Labels: 1 + Poisson(mean − 1), a Zipf first label, extras siblings or Zipf.
  n_lab = np.minimum(1 + rng.poisson(spec.mean_labels - 1, n), spec.max_labels)
  first = _pick(rng, world.label_prob_Y, n)
  owner_e = np.repeat(np.arange(n), n_lab - 1)
  extra = _pick(rng, world.label_prob_Y, len(owner_e))
  sib = rng.random(len(owner_e)) < spec.sibling_labels
  group = world.parent_Y[first[owner_e[sib]]]
  sizes = np.diff(world.group_start_G)[group]
  extra[sib] = world.members_G[world.group_start_G[group] + (rng.random(sib.sum()) * sizes).astype(np.int64)]
  owner = np.concatenate([np.arange(n), owner_e])
  key = np.unique(owner.astype(np.int64) * spec.num_labels + np.concatenate([first, extra]))
  lab_owner, label_idx = key // spec.num_labels, (key % spec.num_labels).astype(np.int32)
  label_indptr = np.concatenate([[0], np.cumsum(np.bincount(lab_owner, minlength=n))])
  # Words: each draw from one of the image's labels (own or group pool) or background.
  if spec.nnz_spread > 0:
    sigma = spec.nnz_spread
    n_draws = np.maximum(np.round(rng.lognormal(np.log(spec.nnz) - sigma**2 / 2, sigma, n)),
                         1).astype(np.int64)
  else:
    n_draws = np.maximum(rng.poisson(spec.nnz, n), 1)
  d_owner = np.repeat(np.arange(n), n_draws)
  T = len(d_owner)
  counts = np.diff(label_indptr)[d_owner]
  lab = label_idx[label_indptr[d_owner] + (rng.random(T) * counts).astype(np.int64)]
  slot = rng.integers(0, spec.words_per_label, T)
  from_group = rng.random(T) < spec.sibling_share
  word = np.where(from_group, world.group_words_GxW[world.parent_Y[lab], slot],
                  world.own_words_YxW[lab, slot])
  background = rng.random(T) >= spec.signal
  word[background] = _pick(rng, world.background_prob_d, background.sum())
  fkey, fcount = np.unique(d_owner.astype(np.int64) * spec.num_features + word, return_counts=True)
  f_owner = fkey // spec.num_features
  return SparseDataset(
      feat_indptr=np.concatenate([[0], np.cumsum(np.bincount(f_owner, minlength=n))]).astype(np.int64),
      feat_idx=(fkey % spec.num_features).astype(np.int32), feat_val=fcount.astype(np.float32),
      label_indptr=label_indptr.astype(np.int64), label_idx=label_idx,
      num_features=spec.num_features, label_names=list(world.label_names),
      label_parents=world.label_parents_YxG)


def _latent_parts(spec: SyntheticSpec, world: World, dim: int):
  rng = np.random.default_rng([spec.seed, 4])
  num_groups = len(world.group_start_G) - 1
  return (rng.normal(0, 1 / np.sqrt(dim), (num_groups, dim)),
          rng.normal(0, 1 / np.sqrt(dim), (spec.num_labels, dim)))


def latent_label_vectors(spec: SyntheticSpec, world: World, dim: int) -> np.ndarray:
  """The world's latent label space, Y×dim: z_y = √s·c_parent(y) + √(1−s)·u_y.

  c (per group) and u (per label) are N(0, I/dim), s = sibling_share: a label
  draws a fraction s of its visual words from its group's pool, so the
  expected overlap of two labels' words and z_y·z_y' (≈ s for siblings, ≈ 0
  otherwise, ≈ 1 for itself) agree.
  """
  c_GxD, u_YxD = _latent_parts(spec, world, dim)
  s = spec.sibling_share
  return np.sqrt(s) * c_GxD[world.parent_Y] + np.sqrt(1 - s) * u_YxD


def pretrained_word_vectors(spec: SyntheticSpec, world: World, dim: int = 300,
                            noise: float = 0.5, scale: float = 2.0, num_extra: int = 0):
  """Stand-in for a text embedding (paper 004 §3.1): (words, vectors_NxD), offline.

  Every label's vector is a noisy copy of its latent one, scale·(z + noise·ε);
  `num_extra` text-only words (named g<group>_x<j>) sit in random groups of
  the same space. Like a real text embedding, it knows which labels are
  related, imperfectly.
  """
  rng = np.random.default_rng([spec.seed, 5])
  c_GxD, _ = _latent_parts(spec, world, dim)
  s = spec.sibling_share
  groups_E = rng.integers(0, len(c_GxD), num_extra)
  extra_ExD = np.sqrt(s) * c_GxD[groups_E] + np.sqrt(1 - s) * rng.normal(
      0, 1 / np.sqrt(dim), (num_extra, dim))
  z_NxD = np.concatenate([latent_label_vectors(spec, world, dim), extra_ExD])
  vectors_NxD = scale * (z_NxD + noise * rng.normal(0, 1 / np.sqrt(dim), z_NxD.shape))
  names = list(world.label_names) + [f'g{g}_x{j}' for j, g in enumerate(groups_E)]
  return names, vectors_NxD.astype(np.float32)

"""Paper 002's proxy supervision (§4.3.2): object and part images paired through part-of.

From images labelled with synsets and the part-of relations among those
synsets, a quadruplet (Io, Lo, Ip, Lp) pairs an image of an object Lo with an
image of one of its parts Lp — the part image is another image, never a crop
of the object's. Images are split into train/valid/test; a relation is kept
only if each split has an image of its whole and a different image of its
part ("every relation in every split"), and only between labels with at
least `min_images` images. Quadruplets are drawn per step from the training
images (paper: 10M from 324k images) and as fixed sets for evaluation.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from wsabie_jax.config.schema import check_ranges
from wsabie_jax.data.batching import EpochOrder, pad_images
from wsabie_jax.data.dataset import SparseDataset


@dataclasses.dataclass(frozen=True)
class ProxyConfig:
  """Paper 002's proxy data and its evaluation sets (config section `proxy`)."""
  min_images: int = 10          # a synset needs this many images to be kept
  num_valid: int = 2000         # fixed validation quadruplets
  num_test: int = 5000          # fixed test quadruplets
  offset: float = 100.0         # λ of the WordNet offset scoring (§6.5)
  unseen_fraction: float = 0.1  # relations kept out of training, in test (§6.5, Table 5)
  nearest_queries: tuple[str, ...] = ('toe.n.01', 'radio-phonograph.n.01', 'loudspeaker.n.01',
                                      'car.n.01', 'wheel.n.01')   # Table 6

  def __post_init__(self):
    check_ranges(self, 'proxy', min_images='>=1', num_valid='>=0', num_test='>=0', offset='>=0',
                 unseen_fraction='[0,1)')


@dataclasses.dataclass
class ProxyData:
  splits: dict            # 'train' | 'valid' | 'test' -> SparseDataset
  relations_Rx2: np.ndarray  # (whole label, part label), kept in every split
  dropped_relations: int
  unseen_Rx2: np.ndarray = None  # relations training never sees (§6.5), a subset of the above

  @property
  def seen_Rx2(self) -> np.ndarray:
    """The relations training quadruplets are drawn from."""
    rel = self.relations_Rx2
    return rel[~self.is_unseen(rel[:, 0], rel[:, 1])].reshape(-1, 2)

  def is_unseen(self, whole_R: np.ndarray, part_R: np.ndarray) -> np.ndarray:
    """Whether each (whole, part) is a relation training never sees (§6.5)."""
    unseen = {tuple(r) for r in np.asarray(self.unseen_Rx2 if self.unseen_Rx2 is not None
                                           else np.zeros((0, 2), int)).reshape(-1, 2).tolist()}
    return np.asarray([(int(o), int(p)) in unseen for o, p in zip(whole_R, part_R)], bool)


def label_index(ds: SparseDataset):
  """(indptr_Y+1, images): the images of label y are images[indptr[y]:indptr[y+1]]."""
  owner = np.repeat(np.arange(ds.num_images), np.diff(ds.label_indptr))
  order = np.argsort(ds.label_idx, kind='stable')
  counts = np.bincount(ds.label_idx, minlength=ds.num_labels)
  return np.concatenate([[0], np.cumsum(counts)]), owner[order]


def build(ds: SparseDataset, relations, fractions=(0.8, 0.1, 0.1), min_images: int = 10,
          seed: int = 0, unseen_fraction: float = 0.0) -> ProxyData:
  """Splits the images and keeps the relations every split can serve; a random
  `unseen_fraction` of those is kept out of training (paper 002 §6.5)."""
  if not np.isclose(sum(fractions), 1.0):
    raise ValueError(f'split fractions {fractions} must sum to 1')
  rel = np.asarray(relations, np.int64).reshape(-1, 2)
  order = np.random.default_rng([seed, 11]).permutation(ds.num_images)
  ends = np.round(np.cumsum(fractions) * ds.num_images).astype(int)
  parts = np.split(order, ends[:-1])
  splits = {name: ds.subset(np.sort(p)) for name, p in zip(('train', 'valid', 'test'), parts)}
  keep = ds.label_frequencies()[rel].min(1) >= min_images
  for split in splits.values():
    keep &= serves_every_whole_image(split, rel)
  kept = rel[keep]
  unseen = np.random.default_rng([seed, 13]).random(len(kept)) < unseen_fraction
  return ProxyData(splits, kept, int((~keep).sum()), kept[unseen])


def serves_every_whole_image(ds: SparseDataset, rel_Rx2: np.ndarray) -> np.ndarray:
  """Whether each relation (whole, part) has, for *every* image of its whole,
  a different image of its part — what `QuadrupletStream` draws: an image of
  the whole, then a part image other than it. True iff the whole has an
  image and the part has two, or one that does not carry the whole too.
  (Counting whole + part images ≥ 2 is not enough: a lone part image that
  also carries the whole, once drawn as the whole's image, leaves none.)"""
  counts = ds.label_frequencies()
  whole_n, part_n = counts[rel_Rx2[:, 0]], counts[rel_Rx2[:, 1]]
  indptr, images = label_index(ds)
  lone_part_image = images[np.minimum(indptr[rel_Rx2[:, 1]], len(images) - 1)]
  return (whole_n > 0) & ((part_n >= 2) | ((part_n == 1) & ~has_label(ds, lone_part_image,
                                                                      rel_Rx2[:, 0])))


def has_label(ds: SparseDataset, images_R: np.ndarray, labels_R: np.ndarray) -> np.ndarray:
  """Whether image images_R[r] carries label labels_R[r] (vectorised)."""
  owner = np.repeat(np.arange(ds.num_images), np.diff(ds.label_indptr))
  keys = np.sort(owner.astype(np.int64) * ds.num_labels + ds.label_idx)
  want = images_R.astype(np.int64) * ds.num_labels + labels_R
  at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
  return keys[at] == want


class QuadrupletStream:
  """Batch `step` of quadruplets from one split: a relation uniformly, then an image
  of its whole and a different image of its part uniformly (a pure function of
  (seed, step), like the other streams). A ResidentStream (training/method.py)."""

  resident, plans, held_bytes, pairs_per_row = True, False, None, 1.0

  def __init__(self, ds: SparseDataset, relations_Rx2: np.ndarray, batch_size: int, seed: int):
    if len(relations_Rx2) == 0:
      raise ValueError('no part-of relation survives in this split')
    self.ds, self.relations, self.batch_size, self.seed = ds, relations_Rx2, batch_size, seed
    self.indptr, self.images = label_index(ds)
    labels_of_images = np.repeat(np.arange(ds.num_labels), np.diff(self.indptr))
    self.keys = labels_of_images * ds.num_images + self.images  # ascending
    self.padded = pad_images(ds)
    self.order = EpochOrder(len(relations_Rx2), batch_size, seed)
    self.position = self.order.position

  @property
  def num_examples(self) -> int:
    return len(self.relations)

  def _pick(self, rng, labels, avoid=None):
    """An image of each label, uniformly; with `avoid`, uniformly among the others."""
    start, count = self.indptr[labels], self.indptr[labels + 1] - self.indptr[labels]
    if avoid is None:
      return self.images[start + (rng.random(len(labels)) * count).astype(np.int64)]
    # Images ascend within a label, so `avoid`'s slot is a binary search away.
    n = self.ds.num_images
    at = np.minimum(np.searchsorted(self.keys, labels * n + avoid), len(self.keys) - 1)
    has = self.keys[at] == labels * n + avoid
    if np.any(count - has < 1):  # `build` keeps only relations that avoid this
      r = int(np.argmax(count - has < 1))
      raise ValueError(f'label {labels[r]} has no image other than image {avoid[r]} '
                       f'(relations must pass proxy.serves_every_whole_image)')
    j = (rng.random(len(labels)) * (count - has)).astype(np.int64)
    return self.images[start + j + (has & (j >= at - start))]

  def quadruplets(self, step: int):
    """(io, lo, ip, lp) arrays of batch `step`."""
    rng = np.random.default_rng([self.seed, 12, step])
    r = self.order.ids(step)
    lo, lp = self.relations[r, 0], self.relations[r, 1]
    io = self._pick(rng, lo)
    ip = self._pick(rng, lp, avoid=io)
    return io, lo, ip, lp

  def batch(self, step: int) -> dict:
    return self.gather(self.table(), self.ids(step), np)

  def ids(self, step: int) -> np.ndarray:
    """Batch `step`'s quadruplets as rows (io, lo, ip, lp): B×4."""
    return np.stack(self.quadruplets(step), axis=1).astype(np.int32)

  def ids_block(self, first: int, n: int) -> np.ndarray:
    """Steps first … first + n − 1's quadruplets, N×B×4 (drawn afresh each step)."""
    return np.stack([self.ids(i) for i in range(first, first + n)])

  @staticmethod
  def budget(ids) -> None:  # (rows are padded, not packed)
    return None

  def table(self) -> dict:
    return {'feat_idx': self.padded.feat_idx_nxF, 'feat_val': self.padded.feat_val_nxF}

  @staticmethod
  def gather(table: dict, quads_Bx4, xp=jax.numpy) -> dict:
    io, lo, ip, lp = (quads_Bx4[:, j] for j in range(4))
    return {'obj_idx_BxF': table['feat_idx'][io], 'obj_val_BxF': table['feat_val'][io],
            'part_idx_BxF': table['feat_idx'][ip], 'part_val_BxF': table['feat_val'][ip],
            'obj_label_B': lo, 'part_label_B': lp, 'weight_B': xp.ones(io.shape[0], xp.float32)}

"""Fixed-shape batches: padded images, a positive-pair stream, eval batches.

Training walks the positive pairs (x, y) (Alg. 1 "pick a random labeled
example") in a fresh permutation each epoch. Batch `step` is a pure function
of (seed, step), so the data position is the step count and resuming needs
nothing else.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterator, NamedTuple

import jax
import numpy as np

from wsabie_jax.data import packing
from wsabie_jax.data.dataset import SparseDataset


class PaddedImages(NamedTuple):
  feat_idx_nxF: np.ndarray  # int32, padding id 0 with value 0 (adds nothing to V x)
  feat_val_nxF: np.ndarray  # float32
  pos_nxP: np.ndarray       # int32 sorted positives, padded with Y
  num_pos_n: np.ndarray     # int32
  known_nxE: np.ndarray | None = None  # int32 labels left out of the ranking, padded with Y
                                       # (leave-one-out held-out images; None elsewhere)


def pad_images(ds: SparseDataset, max_features: int | None = None,
               max_positives: int | None = None) -> PaddedImages:
  """Dense padded copies of the CSR arrays (sizes default to the data's maxima)."""
  f_len = np.diff(ds.feat_indptr)
  p_len = np.diff(ds.label_indptr)
  F = max(int(f_len.max(initial=1)), 1) if max_features is None else max_features
  P = max(int(p_len.max(initial=1)), 1) if max_positives is None else max_positives
  if f_len.max(initial=0) > F or p_len.max(initial=0) > P:
    raise ValueError(f'an image has {f_len.max()} features / {p_len.max()} labels, '
                     f'more than the padded sizes {F} / {P}')
  known = None
  if ds.known_indptr is not None:
    E = max(int(np.diff(ds.known_indptr).max(initial=1)), 1)
    known = _pad(ds.known_indptr, ds.known_idx, E, ds.num_labels, np.int32)
  return PaddedImages(_pad(ds.feat_indptr, ds.feat_idx, F, 0, np.int32),
                      _pad(ds.feat_indptr, ds.feat_val, F, 0, np.float32),
                      _pad(ds.label_indptr, ds.label_idx, P, ds.num_labels, np.int32),
                      p_len.astype(np.int32), known)


def _pad(indptr, values, width, fill, dtype):
  """The CSR rows left-aligned in an n×width array. A boolean mask's True
  cells are assigned in row-major order, which is CSR's: one pass, no index
  arrays (11x faster than scattering by (row, column) at a web-scale batch's
  512 × 343, which made it half of a streamed batch's time)."""
  lengths = np.diff(indptr)
  out = np.full((len(lengths), width), fill, dtype)
  out[np.arange(width) < lengths[:, None]] = values[indptr[0]:indptr[-1]]
  return out


class EpochOrder:
  """Which items batch `step` holds: a new permutation of the items every epoch.

  With `lengths` (each item's non-zeros) the batches are balanced: the items
  of each window of `window` consecutive batches (aligned at step 0) are dealt
  to the window's batches longest first, in snake order (batch 0, 1, …, G−1,
  G−1, …, 0, …), each batch keeping them in their drawn order. Every batch
  then holds about the window's mean, and a one-device pack's slot budget
  (packing.base_budget) sits near it instead of at the largest of many random
  packs (a long-tailed set's vary by ±10% and more: docs/DESIGN.md §1). A
  window holds the same items either way: every item is still drawn once an
  epoch, a batch is a stratified draw of its window, batch `step` is still a
  pure function of (seed, step), and it does not depend on the devices.
  """

  def __init__(self, num_items: int, batch_size: int, seed: int,
               lengths: np.ndarray | None = None, window: int = 16):
    self.num_items, self.batch_size, self.seed = num_items, batch_size, seed
    self.lengths, self.window = lengths, window
    self._perm_epoch, self._perm = -1, None
    self._window = (-1, None)  # (w, its ids) as one value: the prefetching thread reads it too

  def position(self, step: int) -> dict:
    consumed = step * self.batch_size
    return {'pairs_consumed': consumed, 'epoch': consumed // self.num_items,
            'offset_in_epoch': consumed % self.num_items}

  def _permutation(self, epoch: int) -> np.ndarray:
    if epoch != self._perm_epoch:
      self._perm_epoch = epoch
      self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.num_items)
    return self._perm

  def ids(self, step: int) -> np.ndarray:
    return self.ids_block(step, 1)[0]

  def ids_block(self, first: int, n: int) -> np.ndarray:
    """The items of batches first … first + n − 1, n×B (a call's ids at once)."""
    if self.lengths is None:
      return self.drawn(first, n)
    G = self.window
    windows = [self._balanced(w) for w in range(first // G, (first + n - 1) // G + 1)]
    return np.concatenate(windows)[first % G:first % G + n]

  def drawn(self, first: int, n: int) -> np.ndarray:
    """Batches first … first + n − 1 as drawn: slices of the epochs'
    permutations, one per epoch the batches span."""
    start, stop = first * self.batch_size, (first + n) * self.batch_size
    pieces = []
    while start < stop:
      epoch, offset = divmod(start, self.num_items)
      take = min(stop - start, self.num_items - offset)
      pieces.append(self._permutation(epoch)[offset:offset + take])
      start += take
    return np.concatenate(pieces).reshape(n, self.batch_size)

  def _balanced(self, w: int) -> np.ndarray:
    """Window w's batches (G×B): its items dealt to them longest first, snake order."""
    at, ids = self._window
    if w != at:
      G = self.window
      items = self.drawn(w * G, G).reshape(-1)
      longest_first = np.argsort(-self.lengths[items], kind='stable')  # places in the window
      turn, place = np.divmod(np.arange(len(items)), G)
      batch_of = np.empty(len(items), np.int64)
      batch_of[longest_first] = np.where(turn % 2 == 0, place, G - 1 - place)
      ids = items[np.argsort(batch_of, kind='stable')].reshape(G, -1)
      self._window = (w, ids)
    return ids


class PairBatch(NamedTuple):
  """A WSABIE batch (a pytree): B rows, each an image and up to Q of its
  positive pairs (Q = 1: a pair a row). The images' non-zeros come packed in
  S packs of N slots (data/packing.py: what a stream on the devices gathers)
  or padded to F a row (streamed shards, tests; packing.from_padded packs
  them inside the step); the other form is None."""
  label_BxQ: Any                # the rows' positives y
  weight_BxQ: Any               # 1 for a real pair, 0 for padding
  pos_BxP: Any                  # all of the image's positives, sorted, padded with Y
  num_pos_B: Any                # how many (negatives must avoid every one)
  feat_idx_SxN: Any = None      # packed non-zeros: feature ids, values, and the
  feat_val_SxN: Any = None      # row of its pack each belongs to
  feat_row_SxN: Any = None
  feat_idx_BxF: Any = None      # padded non-zeros
  feat_val_BxF: Any = None


def step_view(stacked: PairBatch, i: int) -> PairBatch:
  """Step i of batches stacked along a leading axis: views into them (where
  a builder writes that step: shards.ShardedPairStream.batch's `out`)."""
  return PairBatch(*(None if a is None else a[i] for a in stacked))


class PairStream:
  """Batch `step` of the positive pairs, a new permutation every epoch, the
  images' non-zeros packed (data/packing.py) in `packs` packs (one a device).

  A row holds one image and up to Q = `positives_per_row` of its positives
  (an image with more takes ⌈n/Q⌉ rows; Q = 1: rows of one pair each): a
  PairBatch's label_BxQ and weight_BxQ (0 for padding); a step embeds and
  scores each row's image once for its Q pairs (wsabie/step.py). Either way
  an epoch visits every pair once.
  A ResidentStream (training/method.py) that plans its packs.
  """

  resident, plans, held_bytes = True, True, None

  def __init__(self, ds: SparseDataset, batch_size: int, seed: int, packs: int = 1,
               positives_per_row: int = 1):
    p_len = np.diff(ds.label_indptr)
    if positives_per_row < 1:
      raise ValueError(f'positives_per_row is {positives_per_row}: it must be at least 1')
    self.pos_nxP = _pad(ds.label_indptr, ds.label_idx, max(int(p_len.max(initial=1)), 1),
                        ds.num_labels, np.int32)
    self.num_pos_n = p_len.astype(np.int32)
    Q = self.positives_per_row = positives_per_row
    rows_n = -(-p_len // Q)  # ⌈n/Q⌉ rows an image
    self.row_image = np.repeat(np.arange(ds.num_images), rows_n).astype(np.int32)
    if len(self.row_image) == 0:
      raise ValueError('the training set has no positive pairs')
    # Row r holds positives first_r … first_r + num_r − 1 of its image; padding
    # repeats the first (a real label id; weight 0).
    chunk_r = np.arange(len(self.row_image)) - np.repeat(np.cumsum(rows_n) - rows_n, rows_n)
    first_r = ds.label_indptr[self.row_image] + Q * chunk_r
    self.row_num = np.minimum(Q, ds.label_indptr[self.row_image + 1] - first_r).astype(np.int32)
    offsets_RxQ = np.where(np.arange(Q)[None] < self.row_num[:, None], np.arange(Q)[None], 0)
    self.row_label_RxQ = ds.label_idx[first_r[:, None] + offsets_RxQ].astype(np.int32)
    self.num_pairs = int(self.row_num.sum())
    if batch_size % packs:
      raise ValueError(f'batch size {batch_size} is not a multiple of {packs} devices')
    self.batch_size, self.pack_size = batch_size, batch_size // packs
    self.csr = packing.csr_table(ds.feat_indptr, ds.feat_idx, ds.feat_val)
    self.row_len = self.csr['feat_len'][self.row_image]
    self.order = EpochOrder(len(self.row_image), batch_size, seed, lengths=self.row_len)
    self.base_budget = packing.base_budget(
        self.row_len, self.pack_size, seed, balanced=packs == 1,
        drawn_xB=self.order.ids_block(0, -(-packing.SAMPLED_BATCHES * self.pack_size // batch_size)))
    self.position = self.order.position

  @property
  def num_examples(self) -> int:
    """Rows an epoch (the pairs when Q = 1)."""
    return len(self.row_image)

  @property
  def pairs_per_row(self) -> float:
    return self.num_pairs / len(self.row_image)

  def batch(self, step: int) -> PairBatch:
    ids = self.ids(step)
    return self.gather(self.table(), ids, self.budget(ids[None]), np)

  def budget(self, ids_xB: np.ndarray) -> int:
    """Slots a pack gets for these batches' row ids: the base budget, or the
    next class up where one of them holds more (packing.budget_class)."""
    return packing.budget_class(self.base_budget,
                                packing.needed(self.row_len, ids_xB, self.pack_size))

  # Device-resident form (training/loop.py, train.steps_per_call > 1): the
  # arrays go to the device once; a step's batch is gathered there from its ids.
  def ids(self, step: int) -> np.ndarray:
    """The row ids of batch `step` (the epoch's permutation, as `batch`)."""
    return self.ids_block(step, 1)[0]

  def ids_block(self, first: int, n: int) -> np.ndarray:
    """`ids` of n batches from `first`, n×B (a call's, built at once)."""
    return self.order.ids_block(first, n).astype(np.int32)

  def table(self) -> dict:
    return {'row_image': self.row_image, 'row_label': self.row_label_RxQ,
            'row_num': self.row_num, 'pos': self.pos_nxP, 'num_pos': self.num_pos_n, **self.csr}

  def gather(self, table: dict, rows_B, budget: int, xp=jax.numpy) -> PairBatch:
    """Batch of the given rows from `table` (numpy or jax arrays alike), its
    images packed in `budget` slots a pack."""
    img = table['row_image'][rows_B]
    return PairBatch(**self._rows(table, rows_B, img, xp),
                     **packing.pack(table, img, self.pack_size, budget, xp))

  def plan(self, ids_xB: np.ndarray, budget: int) -> dict:
    """x batches' row ids with their packs planned on the host (packing.plan):
    what `gather_planned` reads a batch from, each leaf x-leading."""
    return {'rows_B': ids_xB,
            **packing.plan(self.csr, self.row_image[ids_xB], self.pack_size, budget)}

  def gather_planned(self, table: dict, planned: dict, xp=jax.numpy) -> PairBatch:
    """`gather` of one batch's `plan` (its rows' packs read, not built)."""
    rows_B = planned['rows_B']
    return PairBatch(**self._rows(table, rows_B, table['row_image'][rows_B], xp),
                     **packing.gather_planned(table, planned))

  def _rows(self, table: dict, rows_B, img, xp) -> dict:
    """The rows' positives (their images `img`): the labels they train on and
    all of their images'."""
    Q = self.positives_per_row
    return {'pos_BxP': table['pos'][img], 'num_pos_B': table['num_pos'][img],
            'label_BxQ': table['row_label'][rows_B],
            'weight_BxQ': (xp.arange(Q)[None] < table['row_num'][rows_B][:, None]).astype(xp.float32)}


class ImageStream:
  """Batch `step` of the images, each with all its tags, a new permutation every epoch.

  The skip-gram objectives (paper 004) sample from an image's tags on device,
  so a batch holds whole images rather than (image, label) pairs.
  A ResidentStream (training/method.py).
  """

  resident, plans, held_bytes, pairs_per_row = True, False, None, 1.0

  def __init__(self, ds: SparseDataset, padded: PaddedImages, batch_size: int, seed: int):
    if ds.num_images == 0:
      raise ValueError('the training set has no images')
    self.padded, self.batch_size = padded, batch_size
    self.order = EpochOrder(ds.num_images, batch_size, seed)
    self.position = self.order.position

  @property
  def num_examples(self) -> int:
    return self.order.num_items

  def batch(self, step: int) -> dict:
    return self.gather(self.table(), self.ids(step), np)

  def ids(self, step: int) -> np.ndarray:
    return self.ids_block(step, 1)[0]

  def ids_block(self, first: int, n: int) -> np.ndarray:
    return self.order.ids_block(first, n).astype(np.int32)

  @staticmethod
  def budget(ids) -> None:  # (rows are padded, not packed)
    return None

  def table(self) -> dict:
    p = self.padded
    return {'feat_idx': p.feat_idx_nxF, 'feat_val': p.feat_val_nxF, 'pos': p.pos_nxP,
            'num_pos': p.num_pos_n}

  @staticmethod
  def gather(table: dict, img_B, xp=jax.numpy) -> dict:
    return {'feat_idx_BxF': table['feat_idx'][img_B], 'feat_val_BxF': table['feat_val'][img_B],
            'pos_BxT': table['pos'][img_B], 'num_pos_B': table['num_pos'][img_B],
            'weight_B': xp.ones(img_B.shape[0], xp.float32)}


def prefetch(batches: Iterator[dict], size: int = 2, put=jax.device_put) -> Iterator[dict]:
  """Builds and transfers batches (with `put`) on a background thread, `size` ahead.

  The thread stops when the consumer does (early stopping, a time budget).
  """
  q: queue.Queue = queue.Queue(maxsize=size)
  stop = threading.Event()
  done = object()

  def enqueue(item) -> bool:
    while not stop.is_set():
      try:
        q.put(item, timeout=0.1)
        return True
      except queue.Full:
        pass
    return False

  def work():
    try:
      for b in batches:
        if not enqueue(put(b)):
          return
      enqueue(done)
    except Exception as e:  # surfaced in the consumer, not lost in the thread
      enqueue(e)

  worker = threading.Thread(target=work, daemon=True)
  worker.start()
  try:
    while (item := q.get()) is not done:
      if isinstance(item, Exception):
        raise item
      yield item
  finally:
    stop.set()
    worker.join()  # a daemon killed inside a transfer at exit aborts the process


class EvalBatch(NamedTuple):
  feat_idx_BxF: np.ndarray  # F: the batch's longest image, rounded up to a power of two
  feat_val_BxF: np.ndarray
  pos_BxP: np.ndarray
  num_real: int             # rows past it repeat the last image (a fixed B)
  known_BxE: np.ndarray | None
  rows_B: np.ndarray        # which images of `padded` the rows are


def eval_batches(padded: PaddedImages, batch_size: int, limit: int | None = None):
  """The first `limit` images (all: None) in fixed-size batches, shortest
  first: each batch is cut to its longest image's non-zeros (rounded up to a
  power of two: few shapes, few compilations), so evaluation costs the real
  non-zeros, not the longest image's. Metrics are sums over images, so the
  order is free; `rows_B` maps rows back to images (annotation)."""
  n = len(padded.num_pos_n) if limit is None else min(limit, len(padded.num_pos_n))
  nonzero_nxF = padded.feat_val_nxF[:n] != 0  # past an image's last non-zero value, nothing adds
  length_n = np.where(nonzero_nxF.any(1), nonzero_nxF.shape[1] - np.argmax(nonzero_nxF[:, ::-1], 1), 0)
  order = np.argsort(length_n, kind='stable')
  for start in range(0, n, batch_size):
    rows = order[np.minimum(np.arange(start, start + batch_size), n - 1)]
    real = int(min(batch_size, n - start))
    longest = int(length_n[rows].max(initial=1))
    width = min(padded.feat_idx_nxF.shape[1], 1 << max(longest - 1, 0).bit_length())
    known = None if padded.known_nxE is None else padded.known_nxE[rows]
    yield EvalBatch(padded.feat_idx_nxF[rows, :width], padded.feat_val_nxF[rows, :width],
                    padded.pos_nxP[rows], real, known, rows)

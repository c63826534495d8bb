"""Data larger than memory: CSR shards on disk, streamed one shard at a time.

Layout of a shard set directory:
  meta.json          sizes, label names, label parents and counts, shard list
  shard-00000.npz    feat_indptr, feat_idx, feat_val, label_indptr, label_idx

Training walks the positive pairs epoch by epoch: the shard order is permuted
per epoch and the pairs within a shard per (epoch, shard), so batch `step` is
a pure function of (seed, step) as with in-memory data. The host holds at
most SHARDS_HELD shards, each padded whole as it loads (a batch is then a
row gather; plus the prefetched batches): the one being read, the next AHEAD,
loaded on threads of their own meanwhile so that a shard boundary does not
stall the steps, and one more for builders on either side of it
(the loop builds a call's batches on several threads: training/dispatch.py).
"""
from __future__ import annotations

import collections
import concurrent.futures
import functools
import json
import multiprocessing
import pathlib
import signal
import threading
import zipfile

import numpy as np

from wsabie_jax.data import synthetic
from wsabie_jax.data.batching import EpochOrder, PairBatch, pad_images, step_view
from wsabie_jax.data.dataset import DataError, SparseDataset


def _write_shard(directory: pathlib.Path, i: int, ds: SparseDataset) -> dict:
  name = f'shard-{i:05d}.npz'
  np.savez(directory / name, feat_indptr=ds.feat_indptr, feat_idx=ds.feat_idx,
           feat_val=ds.feat_val, label_indptr=ds.label_indptr, label_idx=ds.label_idx)
  return {'file': name, 'num_images': ds.num_images, 'num_pairs': len(ds.label_idx),
          'num_features': ds.num_features, 'label_counts': ds.label_frequencies(),
          'max_features': int(np.diff(ds.feat_indptr).max(initial=0)),
          'max_positives': int(np.diff(ds.label_indptr).max(initial=0))}


def _write_meta(directory: pathlib.Path, entries: list, label_names, label_parents) -> dict:
  meta = {'num_features': entries[0]['num_features'], 'label_names': list(label_names),
          'label_parents': None if label_parents is None else np.asarray(label_parents).tolist(),
          'label_counts': np.sum([e.pop('label_counts') for e in entries], 0).tolist(),
          'max_features': max(e.pop('max_features') for e in entries),
          'max_positives': max(e.pop('max_positives') for e in entries),
          'shards': [{k: e[k] for k in ('file', 'num_images', 'num_pairs')} for e in entries]}
  (directory / 'meta.json').write_text(json.dumps(meta))
  return meta


def write_shard_set(directory, shards, label_names, label_parents=None) -> dict:
  """Writes SparseDataset shards (any iterable) and the meta.json describing them."""
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  entries = [_write_shard(directory, i, ds) for i, ds in enumerate(shards)]
  return _write_meta(directory, entries, label_names, label_parents)


def _synthetic_shard(args):
  spec, world, directory, i, n, split = args
  return _write_shard(directory, i, synthetic.generate(spec, n, split, shard=i, world=world))


def write_synthetic(spec: synthetic.SyntheticSpec, directory, num_images: int, shard_size: int,
                    split: str = 'train', progress=None, workers: int = 1) -> dict:
  """Generates a synthetic split shard by shard (each shard its own random
  stream, so the result does not depend on `workers`)."""
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  world = synthetic.make_world(spec)
  jobs = [(spec, world, directory, i, min(shard_size, num_images - s), split)
          for i, s in enumerate(range(0, num_images, shard_size))]
  entries = []
  with _pool(workers) if workers > 1 else _Serial() as pool:
    for entry in pool.imap(_synthetic_shard, jobs):
      entries.append(entry)
      if progress:
        progress(len(entries), len(jobs))
  names = [f'g{g}_l{y}' for y, g in enumerate(world.parent_Y)]
  return _write_meta(directory, entries, names, world.parent_Y[:, None])


_PARENTS = {signal.SIGINT, signal.SIGTERM}  # signals a worker leaves to its parent


def _pool(workers: int):
  """Forked workers that leave signals to the parent: Ctrl-C reaches the whole
  process group, and the parent's handler ends the pool; the pool's own
  SIGTERM (at its end) then stops a worker quietly, not through the handlers
  it forked with (core/signal_notes.py's, which printed a traceback from each
  idle worker). The signals stay blocked from the fork until a worker has
  its own handlers, so a pool that ends at once cannot catch one between."""
  blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _PARENTS)
  try:
    return multiprocessing.get_context('fork').Pool(workers, initializer=_worker_signals)
  finally:
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _worker_signals():
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  signal.pthread_sigmask(signal.SIG_UNBLOCK, _PARENTS)


class _Serial:
  def __enter__(self):
    return self

  def __exit__(self, *exc):
    return False

  imap = staticmethod(map)


class ShardSet:
  """A shard set on disk: its meta data, and each shard loaded on demand."""

  num_seen_labels = None  # no zero-shot hold-out on shards

  def __init__(self, directory, preprocess=lambda ds: ds):
    self.directory = pathlib.Path(directory)
    meta_path = self.directory / 'meta.json'
    if not meta_path.exists():
      raise DataError(meta_path, None, 'not found: write the shards first '
                      '(python launch/make_shards.py)')
    self.meta = json.loads(meta_path.read_text())
    self.preprocess = preprocess
    self.num_pairs_S = np.array([s['num_pairs'] for s in self.meta['shards']], np.int64)
    parents = self.meta['label_parents']
    self.label_parents = None if parents is None else np.asarray(parents, np.int32)

  @property
  def label_names(self) -> list[str]:
    return self.meta['label_names']

  @property
  def num_labels(self) -> int:
    return len(self.meta['label_names'])

  @functools.cached_property
  def num_features(self) -> int:
    """After preprocessing (a bias feature adds one)."""
    return self.load(0).num_features

  @property
  def max_features(self) -> int:
    return self.meta['max_features'] + self.num_features - self.meta['num_features']

  @property
  def max_positives(self) -> int:
    return self.meta['max_positives']

  skipped_empty = 0

  @property
  def num_images(self) -> int:
    return sum(s['num_images'] for s in self.meta['shards'])

  def label_frequencies(self) -> np.ndarray:
    return np.asarray(self.meta['label_counts'])

  def load(self, i: int) -> SparseDataset:
    """Shard i; a DataError naming the shard when it is missing or unreadable
    (truncated: np.load and zipfile raise several kinds)."""
    path = self.directory / self.meta['shards'][i]['file']
    try:
      with np.load(path) as z:
        ds = SparseDataset(z['feat_indptr'], z['feat_idx'], z['feat_val'], z['label_indptr'],
                           z['label_idx'], self.meta['num_features'], self.label_names,
                           self.label_parents)
    except FileNotFoundError:
      raise DataError(path, None, 'shard missing: write the shards again '
                      '(python launch/make_shards.py)') from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
      raise DataError(path, None, f'shard unreadable ({type(error).__name__}: '
                      f'{str(error).splitlines()[0] if str(error) else ""}): write the shards '
                      'again (python launch/make_shards.py)') from None
    return self.preprocess(ds)

  def load_all(self) -> SparseDataset:
    """The whole set in memory (for validation and test sets)."""
    parts = [self.load(i) for i in range(len(self.num_pairs_S))]
    first = parts[0]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
    ptr = lambda name: np.concatenate([[0]] + [getattr(p, name)[1:] + off for p, off in zip(
        parts, np.cumsum([0] + [getattr(p, name)[-1] for p in parts[:-1]]))])
    return SparseDataset(ptr('feat_indptr'), cat('feat_idx'), cat('feat_val'), ptr('label_indptr'),
                         cat('label_idx'), first.num_features, first.label_names, first.label_parents)


# Shards loaded ahead, each on a loader thread of its own: at a device's pace
# (320k pairs/s for the web-scale epoch in a minute) a shard of 250,000 images
# is read in 1.5 s, about what loading and padding the next one takes one
# thread (0.5–2.5 s on a 2-core CPU, most of it first touches of new memory).
AHEAD = 2
SHARDS_HELD = AHEAD + 2  # the one being read, AHEAD loading, one for builders behind


class ShardedPairStream:
  """Like batching.PairStream, over a ShardSet; holds a few shards in memory
  (SHARDS_HELD) and loads the next AHEAD ahead. A streamed Stream
  (training/method.py): each step's batch built on the host. `batch` may be
  called from several threads at once."""

  resident, pairs_per_row = False, 1.0

  def __init__(self, shard_set: ShardSet, batch_size: int, seed: int):
    self.shards, self.batch_size, self.seed = shard_set, batch_size, seed
    self.max_features, self.max_positives = shard_set.max_features, shard_set.max_positives
    self.num_examples = int(shard_set.num_pairs_S.sum())
    # (epoch, slot) -> Future of (dataset, pair_image, pair_label, permutation), oldest first
    self._held: collections.OrderedDict = collections.OrderedDict()
    self._lock = threading.Lock()
    self._loader = concurrent.futures.ThreadPoolExecutor(AHEAD, thread_name_prefix='shard-loader')
    self.held_bytes = 0  # the most the held shards have held at once (arrays' bytes)
    self.shards_held = SHARDS_HELD  # (a benchmark holds every shard: benchmarks/call_building.py)
    self.position = EpochOrder(self.num_examples, batch_size, seed).position

  def _order(self, epoch: int) -> np.ndarray:
    return np.random.default_rng([self.seed, epoch]).permutation(len(self.shards.num_pairs_S))

  def _load(self, epoch: int, slot: int):
    """The shard padded whole, once, on the loader thread: a batch is then a
    row gather of its images (0.13 ms a web-scale batch of 512 on one core,
    where subsetting the CSR arrays and padding each batch took 2.7 ms and
    capped the streamed epoch at the input's rate: docs/SCALE.md)."""
    shard = int(self._order(epoch)[slot])
    ds = self.shards.load(shard)
    padded = pad_images(ds, self.max_features, self.max_positives)
    pair_image = np.repeat(np.arange(ds.num_images), np.diff(ds.label_indptr))
    perm = np.random.default_rng([self.seed, epoch, shard]).permutation(len(pair_image))
    return padded, pair_image, ds.label_idx, perm

  def _future(self, epoch: int, slot: int) -> concurrent.futures.Future:
    """The (epoch, slot) shard's load, started if it is not held (the lock held)."""
    key = (epoch, slot)
    if key not in self._held:
      self._held[key] = self._loader.submit(self._load, epoch, slot)
      while len(self._held) > self.shards_held:
        self._held.popitem(last=False)
    return self._held[key]

  def _shard(self, epoch: int, slot: int):
    """The shard at `slot` of epoch's order; the next AHEAD ones' loads started."""
    with self._lock:
      got = self._future(epoch, slot)
      count = len(self.shards.num_pairs_S)
      for later in range(slot + 1, slot + 1 + AHEAD):  # into the next epochs' orders
        self._future(epoch + later // count, later % count)
    shard = got.result()
    with self._lock:
      held = sum(_nbytes(*f.result()) for f in self._held.values()
                 if f.done() and f.exception() is None)
      self.held_bytes = max(self.held_bytes, held)
    return shard

  def empty(self, steps: int, rows: int) -> PairBatch:
    """Room for `steps` batches of `rows` rows each, stacked (a call's input,
    N×B…): `batch` writes into one step's slice of it (`out`)."""
    room = lambda *shape, dtype=np.int32: np.empty((steps, rows, *shape), dtype)
    return PairBatch(label_BxQ=room(1), weight_BxQ=room(1, dtype=np.float32),
                     pos_BxP=room(self.max_positives), num_pos_B=room(),
                     feat_idx_BxF=room(self.max_features),
                     feat_val_BxF=room(self.max_features, dtype=np.float32))

  def batch(self, step: int, rows: tuple[int, int] | None = None,
            out: PairBatch | None = None) -> PairBatch:
    """Batch `step`, or its rows [start, stop) alone (a process's share of
    it: those rows are all that is read, padded and held). Written into `out`
    where given (one step of `empty`'s arrays: a call's batches gathered in
    place by their builders, with no stacking copy after them); returned."""
    start, stop = rows if rows is not None else (0, self.batch_size)
    out = out if out is not None else step_view(self.empty(1, stop - start), 0)
    ids = step * self.batch_size + np.arange(start, stop)
    epochs, rest = ids // self.num_examples, ids % self.num_examples
    at = 0  # (the parts in the ids' order: epochs, then their shards, ascend with the ids)
    for epoch in np.unique(epochs):
      order = self._order(int(epoch))
      ends = np.cumsum(self.shards.num_pairs_S[order])
      r = rest[epochs == epoch]
      k = np.searchsorted(ends, r, side='right')
      for slot in np.unique(k):
        shard = int(order[slot])
        padded, pair_image, pair_label, perm = self._shard(int(epoch), int(slot))
        offsets = r[k == slot] - (ends[slot] - self.shards.num_pairs_S[shard])
        pairs = perm[offsets]
        images = pair_image[pairs]
        part = slice(at, at + len(pairs))
        for table, into in ((padded.feat_idx_nxF, out.feat_idx_BxF), (padded.feat_val_nxF,
                            out.feat_val_BxF), (padded.pos_nxP, out.pos_BxP),
                            (padded.num_pos_n, out.num_pos_B)):
          # (mode 'clip': the ids are in range, and 'raise' buffers `out`: a second copy)
          np.take(table, images, axis=0, out=into[part], mode='clip')
        out.label_BxQ[part, 0] = pair_label[pairs]
        at += len(pairs)
    out.weight_BxQ[:] = 1
    return out


def _nbytes(padded, *arrays: np.ndarray) -> int:
  return sum(a.nbytes for a in (*padded, *arrays) if a is not None)

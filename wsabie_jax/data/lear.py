"""LEAR's iccv09 image-annotation data (Guillaumin et al.: Corel5k, ESP-game, IAPR-TC12).

Per data set and split the files are, in one directory:
  <ds>_<split>_annot.hvecs        the label vectors (0/1), one per image
  <ds>_<split>_<Feature>.hvecs    uint16 histograms (DenseSift, HarrisHue, …)
  <ds>_<split>_<Feature>.hvecs32  uint32 histograms (Hsv, Lab, Rgb, …)
  <ds>_<split>_Gist.fvec          float32 vectors
  <ds>_dictionary.txt             the label names, one per line
  <ds>_<split>_list.txt           the image names, one per line
A vector file holds, for each image, its length M (uint16 for .hvecs, uint32
for .hvecs32, int32 for .fvec) then M values of that type, little-endian.
The chosen features are concatenated into one sparse bag per image (each
feature type its own id range); `normalize` in the data config then scales it.
"""
from __future__ import annotations

import pathlib

import numpy as np

from wsabie_jax.data.dataset import DataError, SparseDataset

_TYPES = {'.hvecs': ('<u2', '<u2'), '.hvecs32': ('<u4', '<u4'), '.fvec': ('<i4', '<f4')}
DEFAULT_FEATURES = ('DenseSiftV3H1.hvecs', 'DenseHueV3H1.hvecs', 'HarrisSiftV3H1.hvecs',
                    'HarrisHueV3H1.hvecs', 'Gist.fvec', 'HsvV3H1.hvecs32', 'LabV3H1.hvecs32',
                    'RgbV3H1.hvecs32')


def read_vectors(path) -> np.ndarray:
  """An n×M array from a .hvecs, .hvecs32 or .fvec file (DataError on a bad file)."""
  path = pathlib.Path(path)
  if path.suffix not in _TYPES:
    raise DataError(path, None, f'unknown vector file type {path.suffix!r} (expected {sorted(_TYPES)})')
  head_t, value_t = map(np.dtype, _TYPES[path.suffix])
  raw = path.read_bytes()
  if len(raw) < head_t.itemsize:
    raise DataError(path, None, 'empty vector file')
  M = int(np.frombuffer(raw, head_t, 1)[0])
  record = head_t.itemsize + M * value_t.itemsize
  if M <= 0 or len(raw) % record:
    raise DataError(path, None, f'{len(raw)} bytes is not a whole number of {M}-long vectors')
  n = len(raw) // record
  rows = np.frombuffer(raw, np.uint8).reshape(n, record)
  heads = rows[:, :head_t.itemsize].copy().view(head_t)[:, 0]
  bad = np.flatnonzero(heads != M)
  if len(bad):
    raise DataError(path, None, f'vector {bad[0]} has length {heads[bad[0]]}, the first has {M}')
  return rows[:, head_t.itemsize:].copy().view(value_t)


def write_vectors(path, array_NxM: np.ndarray) -> None:
  """The inverse of read_vectors (for fixtures and conversions)."""
  path = pathlib.Path(path)
  head_t, value_t = map(np.dtype, _TYPES[path.suffix])
  n, M = array_NxM.shape
  out = np.zeros((n, head_t.itemsize + M * value_t.itemsize), np.uint8)
  out[:, :head_t.itemsize] = np.full((n, 1), M, head_t).view(np.uint8)
  out[:, head_t.itemsize:] = np.ascontiguousarray(array_NxM, value_t).view(np.uint8)
  path.write_bytes(out.tobytes())


def _lines(path) -> list[str]:
  if not pathlib.Path(path).exists():
    raise DataError(path, None, 'file not found')
  return [line.strip() for line in pathlib.Path(path).read_text(encoding='utf-8').splitlines()
          if line.strip()]


def read_split(root, name: str, split: str, features=DEFAULT_FEATURES,
               skip_empty: bool = True) -> SparseDataset:
  """One split ('train' | 'test') of data set `name` ('corel5k', 'espgame', 'iaprtc12')."""
  root = pathlib.Path(root)
  labels = _lines(root / f'{name}_dictionary.txt')
  images = _lines(root / f'{name}_{split}_list.txt')
  annot_path = root / f'{name}_{split}_annot.hvecs'
  annot = read_vectors(annot_path)
  if annot.shape != (len(images), len(labels)):
    raise DataError(annot_path, None, f'{annot.shape} label vectors for {len(images)} images and '
                    f'{len(labels)} labels')
  blocks, offset = [], 0
  for feature in features:
    path = root / f'{name}_{split}_{feature}'
    X = read_vectors(path).astype(np.float32)
    if len(X) != len(images):
      raise DataError(path, None, f'{len(X)} vectors for {len(images)} images')
    blocks.append((X, offset))
    offset += X.shape[1]
  rows, cols, vals = [], [], []
  for X, start in blocks:
    r, c = np.nonzero(X)
    rows.append(r), cols.append(c + start), vals.append(X[r, c])
  r, c, v = (np.concatenate(a) if a else np.zeros(0) for a in (rows, cols, vals))
  order = np.lexsort((c, r))
  r, c, v = r[order], c[order], v[order]
  img_r, lab_c = np.nonzero(annot)
  keep = np.ones(len(images), bool)
  if skip_empty:
    keep = np.bincount(img_r, minlength=len(images)) > 0
  ds = SparseDataset(
      feat_indptr=np.concatenate([[0], np.cumsum(np.bincount(r, minlength=len(images)))]).astype(np.int64),
      feat_idx=c.astype(np.int32), feat_val=v.astype(np.float32),
      label_indptr=np.concatenate([[0], np.cumsum(np.bincount(img_r, minlength=len(images)))]).astype(np.int64),
      label_idx=lab_c.astype(np.int32), num_features=offset, label_names=labels)
  if keep.all():
    return ds
  out = ds.subset(np.flatnonzero(keep))
  out.skipped_empty = int((~keep).sum())
  return out

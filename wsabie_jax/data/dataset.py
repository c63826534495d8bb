"""The in-memory multi-label data set: sparse features and label sets, CSR.

Data contract (docs/DESIGN.md §3): labels are ids 0..Y−1 with names; an example is
(feature ids, feature values, positive label ids).
"""
from __future__ import annotations

import codecs
import dataclasses
import gzip
import math
import zlib

import numpy as np


class DataError(ValueError):
  """Bad input, with the file and line it came from."""

  def __init__(self, path, line: int | None, message: str):
    where = f'{path}, line {line}' if line is not None else f'{path}'
    super().__init__(f'{where}: {message}')
    self.path, self.line, self.reason = path, line, message

  def __reduce__(self):  # raised again whole after a copy (absl's flag parsing, pickling)
    return type(self), (self.path, self.line, self.reason)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def text_lines(path):
  """(line number, text) for each line of a UTF-8 text file, gzipped or not
  (its first two bytes say): a BOM is dropped and CRLF read as LF, as text
  mode would; a byte that is not UTF-8, or a gzip file cut short, is a
  DataError naming the file and line (it was a 50-line UnicodeDecodeError)."""
  with open(path, 'rb') as head:
    gzipped = head.read(2) == b'\x1f\x8b'
  line_no = 0
  try:
    with (gzip.open if gzipped else open)(path, 'rb') as f:
      for line_no, data in enumerate(f, 1):
        if line_no == 1 and data.startswith(codecs.BOM_UTF8):
          data = data[len(codecs.BOM_UTF8):]
        try:
          text = data.decode('utf-8')
        except UnicodeDecodeError as error:
          raise DataError(path, line_no, f'byte 0x{data[error.start]:02x} at column '
                          f'{error.start + 1} is not UTF-8: save the file as UTF-8 text') from None
        yield line_no, text[:-2] + '\n' if text.endswith('\r\n') else text
  except (EOFError, gzip.BadGzipFile, zlib.error) as error:
    raise DataError(path, line_no + 1, f'the gzip file is cut short or damaged '
                    f'({type(error).__name__})') from None


def read_label_names(path) -> list[str]:
  """One label name a line (labels.txt, `text_lines`): a BOM is dropped, so are
  trailing blank lines; a blank or repeated name elsewhere is a DataError
  naming its line (it would shift or merge the label ids after it)."""
  names = [line.rstrip('\r\n') for _, line in text_lines(path)]
  while names and not names[-1].strip():
    names.pop()
  first = {}
  for line_no, name in enumerate(names, 1):
    if not name.strip():
      raise DataError(path, line_no, 'blank label name (label ids are line numbers: a blank '
                      'line shifts every id after it)')
    if name in first:
      raise DataError(path, line_no, f'label name {name!r} repeats line {first[name]}')
    first[name] = line_no
  return names


def is_int(token: str) -> bool:
  """An ASCII integer (str.isdigit also takes '²' and other digits int() refuses)."""
  body = token[1:] if token[:1] == '-' else token
  return body.isascii() and body.isdigit()


def parse_number(token: str, path, line_no: int, what: str) -> float:
  """A float finite in float32 (what training computes in), or a DataError
  naming the file, line and field. (1e39 is finite in float64 but inf in
  float32: it once trained a NaN model that reported p@1 3.5.)"""
  try:
    value = float(token)
  except ValueError:
    raise DataError(path, line_no, f'{what}: {token!r} is not a number') from None
  if not math.isfinite(value):
    raise DataError(path, line_no, f'{what}: value {token!r} is not finite')
  if abs(value) > FLOAT32_MAX:
    raise DataError(path, line_no, f'{what}: value {token!r} overflows float32 '
                                   f'(|x| ≤ {FLOAT32_MAX:.4g})')
  return value


@dataclasses.dataclass
class SparseDataset:
  feat_indptr: np.ndarray   # (n+1,) int64
  feat_idx: np.ndarray      # (nnz,) int32
  feat_val: np.ndarray      # (nnz,) float32
  label_indptr: np.ndarray  # (n+1,) int64
  label_idx: np.ndarray     # (npos,) int32, sorted and unique within an image
  num_features: int
  label_names: list[str]
  label_parents: np.ndarray | None = None  # (Y, G) is-a parent ids, −1 padded
  skipped_empty: int = 0    # examples dropped for an empty label set
  num_seen_labels: int | None = None  # zero-shot hold-out: labels from this id on never train
  # Leave-one-out held-out images: the labels training knows them by, left out of
  # their ranking (CSR like the labels; None elsewhere).
  known_indptr: np.ndarray | None = None
  known_idx: np.ndarray | None = None
  # data.standardize's statistics (data/standardize.Standardization) where they
  # shifted these features: the training set carries them into vocabulary.json.
  standardized: object | None = None

  @property
  def num_images(self) -> int:
    return len(self.feat_indptr) - 1

  @property
  def num_labels(self) -> int:
    return len(self.label_names)

  def features(self, i: int):
    s, e = self.feat_indptr[i], self.feat_indptr[i + 1]
    return self.feat_idx[s:e], self.feat_val[s:e]

  def dense_features(self) -> np.ndarray:
    """n×d float32: each image's feature values, zeros where it has none."""
    X_nxd = np.zeros((self.num_images, self.num_features), np.float32)
    rows = np.repeat(np.arange(self.num_images), np.diff(self.feat_indptr))
    np.add.at(X_nxd, (rows, self.feat_idx), self.feat_val)
    return X_nxd

  def labels(self, i: int) -> np.ndarray:
    return self.label_idx[self.label_indptr[i]:self.label_indptr[i + 1]]

  def subset(self, rows: np.ndarray) -> 'SparseDataset':
    rows = np.asarray(rows)
    f_ptr, f_idx = _take_csr(self.feat_indptr, rows)
    l_ptr, l_idx = _take_csr(self.label_indptr, rows)
    known = {}
    if self.known_indptr is not None:
      k_ptr, k_idx = _take_csr(self.known_indptr, rows)
      known = dict(known_indptr=k_ptr, known_idx=self.known_idx[k_idx])
    return dataclasses.replace(
        self, feat_indptr=f_ptr, feat_idx=self.feat_idx[f_idx], feat_val=self.feat_val[f_idx],
        label_indptr=l_ptr, label_idx=self.label_idx[l_idx], skipped_empty=0, **known)

  def known(self, i: int) -> np.ndarray:
    """Labels left out of image i's ranking (leave-one-out), empty elsewhere."""
    if self.known_indptr is None:
      return np.zeros(0, np.int32)
    return self.known_idx[self.known_indptr[i]:self.known_indptr[i + 1]]

  def label_frequencies(self) -> np.ndarray:
    return np.bincount(self.label_idx, minlength=self.num_labels)


def _take_csr(indptr: np.ndarray, rows: np.ndarray):
  lengths = indptr[rows + 1] - indptr[rows]
  new_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
  starts = np.repeat(indptr[rows] - new_ptr[:-1], lengths)
  return new_ptr, starts + np.arange(new_ptr[-1])


def from_lists(features: list[tuple[np.ndarray, np.ndarray]], labels: list[np.ndarray],
               num_features: int, label_names: list[str], **kw) -> SparseDataset:
  """Builds the CSR arrays; labels are sorted and deduplicated per example, and
  a feature id repeated within an example (`19:1 19:2`) is one feature with
  the values summed (as scipy.sparse reads it), before any normalisation."""
  features = [_merge_repeats(np.asarray(i), np.asarray(v)) for i, v in features]
  f_len = [len(i) for i, _ in features]
  labels = [np.unique(np.asarray(l, np.int32)) for l in labels]
  return SparseDataset(
      feat_indptr=np.concatenate([[0], np.cumsum(f_len)]).astype(np.int64),
      feat_idx=np.concatenate([np.asarray(i, np.int32) for i, _ in features] or [np.zeros(0, np.int32)]),
      feat_val=np.concatenate([np.asarray(v, np.float32) for _, v in features] or [np.zeros(0, np.float32)]),
      label_indptr=np.concatenate([[0], np.cumsum([len(l) for l in labels])]).astype(np.int64),
      label_idx=np.concatenate(labels or [np.zeros(0, np.int32)]).astype(np.int32),
      num_features=num_features, label_names=list(label_names), **kw)


def _merge_repeats(ids: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  unique, where = np.unique(ids, return_inverse=True)
  if len(unique) == len(ids):
    return ids, vals
  summed = np.zeros(len(unique), np.float64)
  np.add.at(summed, where, vals)
  return unique, summed.astype(np.float32)


def split_validation(ds: SparseDataset, fraction: float, seed: int):
  """Carves a random validation part off the training set: (train, valid)."""
  if not 0 <= fraction < 1:
    raise ValueError(f'validation fraction must be in [0, 1), got {fraction}')
  order = np.random.default_rng(seed).permutation(ds.num_images)
  n_valid = int(round(fraction * ds.num_images))
  train = dataclasses.replace(ds.subset(np.sort(order[n_valid:])), skipped_empty=ds.skipped_empty)
  return train, ds.subset(np.sort(order[:n_valid]))


def normalize(ds: SparseDataset, kind: str) -> SparseDataset:
  """'l2' scales each image's feature vector to unit norm; 'log_l2' first
  damps each value to sign(x)·log(1 + |x|) (a word seen 10 times weighs
  2.4, not 10); 'none' keeps it."""
  if kind == 'none':
    return ds
  if kind not in ('l2', 'log_l2'):
    raise ValueError(f"normalize must be 'l2', 'log_l2' or 'none', got {kind!r}")
  if kind == 'log_l2':
    ds = dataclasses.replace(ds, feat_val=(np.sign(ds.feat_val) * np.log1p(np.abs(ds.feat_val))
                                           ).astype(np.float32))
  lengths = np.diff(ds.feat_indptr)
  sq = np.bincount(np.repeat(np.arange(ds.num_images), lengths),
                   weights=ds.feat_val.astype(np.float64) ** 2, minlength=ds.num_images)
  sq = np.where(sq > 0, sq, 1.0)
  scale = np.repeat(1.0 / np.sqrt(sq), lengths)
  return dataclasses.replace(ds, feat_val=(ds.feat_val * scale).astype(np.float32))


def idf(train: SparseDataset) -> np.ndarray:
  """f32[d]: each feature's inverse document frequency on `train`,
  log((1 + n) / (1 + df)) + 1 (scikit-learn's TfidfTransformer's smooth form;
  a feature in every row weighs 1)."""
  df = np.bincount(train.feat_idx, minlength=train.num_features)
  return (np.log((1 + train.num_images) / (1 + df)) + 1).astype(np.float32)


def idf_weighted(ds: SparseDataset, idf_d: np.ndarray) -> SparseDataset:
  """Each value times its feature's `idf_d` (0 past its end: a feature the
  training split never had), then each row l2-normalised: tf-idf."""
  weight = np.where(ds.feat_idx < len(idf_d), idf_d[np.minimum(ds.feat_idx, len(idf_d) - 1)], 0.0)
  return normalize(dataclasses.replace(ds, feat_val=(ds.feat_val * weight).astype(np.float32)),
                   'l2')


def add_bias_feature(ds: SparseDataset, value: float) -> SparseDataset:
  """Appends feature id d with `value` to every image: its row of V acts as a
  learnt label prior (W_i · V_bias), the embedding form of a label bias."""
  n = ds.num_images
  ends = ds.feat_indptr[1:]
  feat_idx = np.insert(ds.feat_idx, ends, ds.num_features)
  feat_val = np.insert(ds.feat_val, ends, np.float32(value))
  return dataclasses.replace(ds, feat_idx=feat_idx.astype(np.int32), feat_val=feat_val,
                             feat_indptr=ds.feat_indptr + np.arange(n + 1),
                             num_features=ds.num_features + 1)


def select_labels(ds: SparseDataset, labels: np.ndarray, drop_unlabelled: bool = True) -> SparseDataset:
  """The data set over the label vocabulary `labels` (old ids, in their new order).

  Label `labels[j]` becomes id j; other labels leave the images' label sets.
  Images left without labels are dropped (counted in skipped_empty) unless
  `drop_unlabelled` is false.
  """
  labels = np.asarray(labels, np.int64)
  new_id = np.full(ds.num_labels, -1, np.int64)
  new_id[labels] = np.arange(len(labels))
  mapped = new_id[ds.label_idx]
  owner = np.repeat(np.arange(ds.num_images), np.diff(ds.label_indptr))
  keep = mapped >= 0
  key = np.sort(owner[keep] * len(labels) + mapped[keep])  # sorted labels within each image
  counts = np.bincount(key // max(len(labels), 1), minlength=ds.num_images)
  out = dataclasses.replace(
      ds, label_indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
      label_idx=(key % max(len(labels), 1)).astype(np.int32),
      label_names=[ds.label_names[i] for i in labels],
      label_parents=None if ds.label_parents is None else ds.label_parents[labels])
  if not drop_unlabelled:
    return out
  labelled = np.flatnonzero(counts > 0)
  return dataclasses.replace(out.subset(labelled),
                             skipped_empty=ds.skipped_empty + ds.num_images - len(labelled))


def hold_out_labels(num_labels: int, fraction: float, seed: int) -> tuple[np.ndarray, int]:
  """A label order with a random `fraction` of the labels last: (order, num_seen).

  The zero-shot protocol (paper 004 Table 2): training never sees the last
  num_labels − num_seen labels; test images are ranked against them.
  """
  if not 0 <= fraction < 1:
    raise ValueError(f'holdout fraction must be in [0, 1), got {fraction}')
  held = np.zeros(num_labels, bool)
  held[np.random.default_rng([seed, 7]).permutation(num_labels)[:int(round(fraction * num_labels))]] = True
  return np.concatenate([np.flatnonzero(~held), np.flatnonzero(held)]), int((~held).sum())


def concat(parts: list[SparseDataset]) -> SparseDataset:
  """The images of several data sets over the same features and labels, in order."""
  first = parts[0]
  if any(p.known_indptr is not None for p in parts):
    raise ValueError('concat: leave-one-out held-out sets cannot be concatenated')
  for p in parts[1:]:
    if p.num_features != first.num_features or p.label_names != first.label_names:
      raise ValueError('concat: the data sets differ in features or labels')
  ptr = lambda name: np.concatenate([[0]] + [getattr(p, name)[1:] + sum(
      getattr(q, name)[-1] for q in parts[:i]) for i, p in enumerate(parts)]).astype(np.int64)
  cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
  return dataclasses.replace(first, feat_indptr=ptr('feat_indptr'), feat_idx=cat('feat_idx'),
                             feat_val=cat('feat_val'), label_indptr=ptr('label_indptr'),
                             label_idx=cat('label_idx'),
                             skipped_empty=sum(p.skipped_empty for p in parts))


def leave_one_out(ds: SparseDataset, seed: int) -> tuple[SparseDataset, SparseDataset]:
  """Paper 003's protocol: one label of each image with ≥ 2 labels, uniformly,
  is held out. Returns (train: every image with the labels not held out,
  held out: those images with the held-out label as their one positive and the
  rest as `known`, left out of their ranking)."""
  rng = np.random.default_rng([seed, 17])
  counts = np.diff(ds.label_indptr)
  rows = np.flatnonzero(counts >= 2)
  if len(rows) == 0:
    raise ValueError('leave_one_out: no image has two labels to hold one out')
  pick = ds.label_indptr[rows] + (rng.random(len(rows)) * counts[rows]).astype(np.int64)
  held = np.zeros(len(ds.label_idx), bool)
  held[pick] = True
  owner = np.repeat(np.arange(ds.num_images), counts)
  kept_counts = np.bincount(owner[~held], minlength=ds.num_images)
  train = dataclasses.replace(
      ds, label_indptr=np.concatenate([[0], np.cumsum(kept_counts)]).astype(np.int64),
      label_idx=ds.label_idx[~held])
  known = train.subset(rows)  # the held-out images as training knows them
  return train, dataclasses.replace(
      known, label_indptr=np.arange(len(rows) + 1, dtype=np.int64),
      label_idx=ds.label_idx[pick].astype(np.int32),
      known_indptr=known.label_indptr, known_idx=known.label_idx)


def image_id_features(ds: SparseDataset) -> SparseDataset:
  """Each image's features replaced by its id (one-hot, value 1): V becomes one
  learnt embedding per image (paper 003), shared by its held-out copy."""
  n = ds.num_images
  return dataclasses.replace(ds, feat_indptr=np.arange(n + 1, dtype=np.int64),
                             feat_idx=np.arange(n, dtype=np.int32),
                             feat_val=np.ones(n, np.float32), num_features=n,
                             standardized=None)  # (the visual features' shift no longer applies)

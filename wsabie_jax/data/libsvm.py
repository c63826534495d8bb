"""Reader for the multi-label libsvm / extreme-classification text format.

Each line is `l1,l2,... f:v f:v ...`; label ids and feature ids are integers.
An optional first line `num_points num_features num_labels` (the XMC
repository's header) fixes the sizes; otherwise they come from the arguments
or the largest ids seen.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from wsabie_jax.data.dataset import (DataError, SparseDataset, from_lists, is_int, parse_number,
                                     text_lines)


def read_libsvm(path, num_features: int | None = None, num_labels: int | None = None,
                label_names: list[str] | None = None, feature_base: int = 0,
                skip_empty: bool = True) -> SparseDataset:
  """feature_base: the id of the first feature in the file (0 for XMC, 1 for libsvm)."""
  features, labels, line_of_row = [], [], []
  skipped = 0
  sizes_given = num_features, num_labels or label_names
  header = None
  progress = _Progress(path)
  for line_no, raw in text_lines(path):  # (gzipped or not; a BOM is dropped)
    progress.line(len(raw))
    line = raw.rstrip('\n')
    if not line.strip() or line.lstrip().startswith('#'):
      continue
    tokens = line.split()
    if line_no == 1 and len(tokens) == 3 and all(is_int(t) for t in tokens):
      header = [int(t) for t in tokens]
      num_features = num_features or header[1]
      num_labels = num_labels or header[2]
      continue
    if line[0].isspace() or ':' in tokens[0]:
      label_tokens, feat_tokens = [], tokens
    else:
      label_tokens, feat_tokens = tokens[0].split(','), tokens[1:]
    try:
      if not all(is_int(t) for t in label_tokens if t):
        raise ValueError
      row_labels = np.array([int(t) for t in label_tokens if t], np.int64)
    except ValueError:
      raise DataError(path, line_no, f'labels {tokens[0]!r} are not comma-separated integers') from None
    if len(row_labels) and (row_labels.min() < 0 or (num_labels and row_labels.max() >= num_labels)):
      raise DataError(path, line_no, f'label id out of range [0, {num_labels}): {row_labels.tolist()}')
    ids, vals = [], []
    for tok in feat_tokens:
      fid, sep, val = tok.partition(':')
      if not sep or not is_int(fid):
        raise DataError(path, line_no, f'feature {tok!r} is not "id:value"')
      v = parse_number(val, path, line_no, f'feature {tok!r}')
      i = int(fid) - feature_base
      if i < 0 or (num_features and i >= num_features):
        raise DataError(path, line_no, f'feature id {fid} out of range for {num_features} features '
                        f'(first id {feature_base})')
      ids.append(i)
      vals.append(v)
    if len(row_labels) == 0 and skip_empty:
      skipped += 1
      continue
    features.append((np.asarray(ids, np.int64), np.asarray(vals, np.float32)))
    labels.append(row_labels)
    line_of_row.append(line_no)
  if header and header[0] != len(features) + skipped:
    raise DataError(path, 1, f'header promises {header[0]} points, file has {len(features) + skipped}')
  max_feat = max((int(i.max()) for i, _ in features if len(i)), default=-1)
  max_label = max((int(l.max()) for l in labels if len(l)), default=-1)
  if not sizes_given[0]:
    _check_implied(path, 'feature', [i for i, _ in features], line_of_row, feature_base)
  if not sizes_given[1]:
    _check_implied(path, 'label', labels, line_of_row, 0)
  num_features = num_features or max_feat + 1
  if label_names is None:
    label_names = [str(i) for i in range(num_labels or max_label + 1)]
  elif max_label >= len(label_names):
    raise DataError(path, None, f'label id {max_label} has no name ({len(label_names)} names given)')
  return from_lists(features, labels, num_features, label_names, skipped_empty=skipped)


class _Progress:
  """A line on stderr every tenth of a file over SHOW_ABOVE_BYTES: reading one
  takes minutes, which looked like a hang."""
  SHOW_ABOVE_BYTES = 64 << 20

  def __init__(self, path):
    self.path, self.size = path, os.path.getsize(path)
    self.read, self.shown, self.start = 0, 0, time.perf_counter()

  def line(self, chars: int):
    if self.size < self.SHOW_ABOVE_BYTES:
      return
    self.read += chars  # (characters: close enough to bytes for a progress line)
    tenth = min(10, 10 * self.read // self.size)
    if tenth > self.shown:
      self.shown = tenth
      print(f'reading {self.path}: {10 * tenth}% ({self.read / 2**20:,.0f} MiB, '
            f'{time.perf_counter() - self.start:.0f} s)', file=sys.stderr, flush=True)


# Ids may leave gaps (labels unused in this file), but sizes implied by the
# largest id are refused past this when most ids are unused: a stray id of
# 2,000,000,000 once made a 3M-label model, or a 460 GB allocation.
IMPLIED_IDS_LIMIT = 1_000_000
UNUSED_IDS_FACTOR = 50


def _check_implied(path, what: str, rows: list, line_of_row: list[int], base: int) -> None:
  """DataError naming the line of the largest id when the size it implies
  is over IMPLIED_IDS_LIMIT and UNUSED_IDS_FACTOR× the distinct ids used."""
  largest = [int(r.max()) if len(r) else -1 for r in rows]
  if not largest or max(largest) + 1 <= IMPLIED_IDS_LIMIT:
    return
  used = len(np.unique(np.concatenate(rows)))
  top = int(np.argmax(largest))
  if largest[top] + 1 > UNUSED_IDS_FACTOR * used:
    raise DataError(path, line_of_row[top], f'{what} id {largest[top] + base:,} implies '
                    f'{largest[top] + 1:,} {what}s but the file uses {used:,} distinct ids: '
                    f'number them 0 … N−1, or give the sizes (a header line "points features '
                    f'labels"{", or labels.txt" if what == "label" else ""})')


def write_libsvm(ds: SparseDataset, path, feature_base: int = 0):
  """Writes `ds` in the format read_libsvm reads (with the XMC header line)."""
  with open(path, 'w', encoding='utf-8') as f:
    f.write(f'{ds.num_images} {ds.num_features} {ds.num_labels}\n')
    for i in range(ds.num_images):
      ids, vals = ds.features(i)
      feats = ' '.join(f'{j + feature_base}:{v:.6g}' for j, v in zip(ids, vals))
      f.write(','.join(map(str, ds.labels(i))) + ' ' + feats + '\n')

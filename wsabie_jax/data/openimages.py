"""Open Images image-level labels joined to a features file.

Open Images (V4–V7) gives, per split, a CSV of human-verified image-level
labels with a header `ImageID,Source,LabelName,Confidence` (Confidence 1: the
class is present, 0: verified absent) and one CSV of class descriptions
`LabelName,DisplayName` (MIDs such as /m/0dgw9r; the V4–V6 file has no header
line). The images' features are the user's, one file per split:

  <split>-features.txt   "ImageID idx:value idx:value ..." a line (sparse), or
  <split>-features.npz   arrays `image_ids` (n strings) and `features` (n×d).

Splits: train, validation, test (each where its labels and features exist).
The vocabulary is every class present on a training image, in MID order
(display names; a repeated one gets its MID appended);
labelled images without features are skipped and counted.
"""
from __future__ import annotations

import csv
import pathlib

import numpy as np

from wsabie_jax.data.dataset import DataError, SparseDataset, from_lists, parse_number

SPLITS = ('train', 'validation', 'test')
LABEL_FILES = ('{split}-annotations-human-imagelabels.csv',
               'oidv7-{split}-annotations-human-imagelabels.csv',
               '{split}-annotations-human-imagelabels-boxable.csv')
DESCRIPTION_FILES = ('oidv7-class-descriptions.csv', 'class-descriptions.csv',
                     'oidv6-class-descriptions.csv', 'class-descriptions-boxable.csv')


def _first(root, patterns, **fmt):
  for p in patterns:
    path = pathlib.Path(root) / p.format(**fmt)
    if path.exists():
      return path
  return None


def read_descriptions(path) -> dict[str, str]:
  """MID → display name (a header line, if present, is recognised and skipped)."""
  names = {}
  with open(path, encoding='utf-8', newline='') as f:
    for line_no, row in enumerate(csv.reader(f), 1):
      if not row or (line_no == 1 and row[0] == 'LabelName'):
        continue
      if len(row) < 2:
        raise DataError(path, line_no, 'expected "LabelName,DisplayName"')
      names[row[0]] = row[1]
  return names


def read_image_labels(path) -> dict[str, list[str]]:
  """ImageID → its present classes (Confidence > 0), in file order."""
  out: dict[str, list[str]] = {}
  with open(path, encoding='utf-8', newline='') as f:
    reader = csv.reader(f)
    header = next(reader, None)
    if not header or not {'ImageID', 'LabelName', 'Confidence'} <= set(header):
      raise DataError(path, 1, f'header {header} lacks ImageID, LabelName, Confidence')
    col = {name: header.index(name) for name in ('ImageID', 'LabelName', 'Confidence')}
    for line_no, row in enumerate(reader, 2):
      if not row:
        continue
      if len(row) != len(header):
        raise DataError(path, line_no, f'{len(row)} fields, the header has {len(header)}')
      labels = out.setdefault(row[col['ImageID']], [])
      if parse_number(row[col['Confidence']], path, line_no, 'Confidence') > 0:
        labels.append(row[col['LabelName']])
  return out


def read_features(path) -> tuple[dict[str, int], list[tuple[np.ndarray, np.ndarray]], int]:
  """({ImageID: row}, sparse rows, number of features) of a features file."""
  path = pathlib.Path(path)
  if path.suffix == '.npz':
    with np.load(path, allow_pickle=False) as z:
      if 'image_ids' not in z or 'features' not in z:
        raise DataError(path, None, 'expected arrays image_ids and features')
      ids, X = [str(i) for i in z['image_ids']], np.asarray(z['features'], np.float32)
    if X.ndim != 2 or len(X) != len(ids):
      raise DataError(path, None, f'features {X.shape} do not match {len(ids)} image_ids')
    rows = [(np.flatnonzero(x), x[x != 0]) for x in X]
    return {i: r for r, i in enumerate(ids)}, rows, X.shape[1]
  ids, rows, width = {}, [], 0
  with open(path, encoding='utf-8') as f:
    for line_no, line in enumerate(f, 1):
      tokens = line.split()
      if not tokens:
        continue
      if tokens[0] in ids:
        raise DataError(path, line_no, f'image {tokens[0]} already on an earlier line')
      idx, val = [], []
      for tok in tokens[1:]:
        i, sep, v = tok.partition(':')
        if not sep or not i.isdigit():
          raise DataError(path, line_no, f'feature {tok!r} is not "index:value"')
        idx.append(int(i))
        val.append(parse_number(v, path, line_no, f'feature {tok!r}'))
      ids[tokens[0]] = len(rows)
      rows.append((np.asarray(idx, np.int64), np.asarray(val, np.float32)))
      width = max(width, max(idx, default=-1) + 1)
  return ids, rows, width


def read_splits(root, num_features: int | None = None) -> tuple[dict[str, SparseDataset], dict]:
  """({split: SparseDataset}, {split: image ids in row order}); skipped images
  (labelled, no features) are counted in each data set's `skipped_empty`."""
  root = pathlib.Path(root)
  descriptions_path = _first(root, DESCRIPTION_FILES)
  if descriptions_path is None:
    raise DataError(root, None, f'no class descriptions file ({" / ".join(DESCRIPTION_FILES)})')
  descriptions = read_descriptions(descriptions_path)
  found = {}
  for split in SPLITS:
    labels_path = _first(root, LABEL_FILES, split=split)
    features_path = _first(root, ('{split}-features.npz', '{split}-features.txt'), split=split)
    if labels_path and features_path:
      found[split] = (labels_path, features_path)
  if 'train' not in found:
    raise DataError(root, None, 'need train-annotations-human-imagelabels.csv and '
                    'train-features.{txt,npz}')
  parsed = {s: (read_image_labels(l), read_features(f)) for s, (l, f) in found.items()}
  train_labels = parsed['train'][0]
  mids = sorted({m for labels in train_labels.values() for m in labels})
  unknown = [m for m in mids if m not in descriptions]
  if unknown:
    raise DataError(descriptions_path, None, f'{len(unknown)} training classes without a '
                    f'description, e.g. {unknown[0]}')
  column = {m: i for i, m in enumerate(mids)}
  shown = [descriptions[m] for m in mids]
  repeated = {n for n in shown if shown.count(n) > 1}  # e.g. two classes named "Bow"
  names = [f'{n} ({m})' if n in repeated else n for n, m in zip(shown, mids)]
  d = num_features or max(p[1][2] for p in parsed.values())
  out, image_ids = {}, {}
  for split, (labels, (row_of, rows, _)) in parsed.items():
    keep = [i for i in labels if i in row_of]
    feats = [rows[row_of[i]] for i in keep]
    too_wide = [i for i, (idx, _) in zip(keep, feats) if len(idx) and idx.max() >= d]
    if too_wide:
      raise DataError(found[split][1], None, f'image {too_wide[0]} has a feature index ≥ {d}')
    ys = [[column[m] for m in labels[i] if m in column] for i in keep]
    ds = from_lists(feats, ys, d, names)
    ds.skipped_empty = len(labels) - len(keep)
    out[split], image_ids[split] = ds, keep
  return out, image_ids

"""NUS-WIDE (Chua et al. 2009) as released: text matrices, one image a line.

Files are looked up by name anywhere under the root, so the release's
archives can be unpacked as they come:

  ImageList/Imagelist.txt           every image (269,648), in the order of the
                                    all-image files below (Windows paths);
  ImageList/{Train,Test}Imagelist.txt  the official split (161,789 / 107,859);
  Low_Level_Features/<name>.dat     all images: Normalized_CH (64-D colour
                                    histogram), Normalized_CORR (144), Normalized_EDH
                                    (73), Normalized_WT (128), Normalized_CM55 (225),
                                    BoW_int (500 SIFT visual words), space-separated;
                                    or per split: {Train,Test}_<name>.dat;
  NUS_WID_Tags/TagList1k.txt + AllTags1k.txt   the 1,000 tags, a 0/1 row an image
                                    (or Train_Tags1k.dat / Test_Tags1k.dat per split);
  ConceptsList/Concepts81.txt + Groundtruth/AllLabels/Labels_<concept>.txt
                                    the 81 concepts, one 0/1 a line an image.

Features of several files are concatenated (dense rows stored sparse: zeros
dropped); `labels='tags1k'` or `'concepts81'`.
"""
from __future__ import annotations

import pathlib

import numpy as np

from wsabie_jax.data.dataset import DataError, from_lists

FEATURES = ('Normalized_CH', 'Normalized_CM55', 'Normalized_CORR', 'Normalized_EDH',
            'Normalized_WT', 'BoW_int')
LABELS = ('tags1k', 'concepts81')
SPLITS = {'train': 'Train', 'test': 'Test'}


def find(root, name: str, required: bool = True) -> pathlib.Path | None:
  hits = sorted(pathlib.Path(root).rglob(name))
  if not hits and required:
    raise DataError(root, None, f'{name} not found under the NUS-WIDE folder')
  return hits[0] if hits else None


def read_matrix(path, num_rows: int | None = None) -> np.ndarray:
  """A whitespace-separated numeric matrix, one row a line (numpy's C parser)."""
  try:
    matrix = np.loadtxt(path, dtype=np.float32, ndmin=2)
  except ValueError as e:  # numpy names the line and the column count
    raise DataError(path, None, f'not a numeric matrix: {e}') from None
  if num_rows is not None and len(matrix) != num_rows:
    raise DataError(path, None, f'{len(matrix)} rows, the image list has {num_rows}')
  return matrix


def image_key(line: str) -> str:
  """'C:\\ImageData\\Flickr\\actor\\0001_2.jpg' and 'actor\\0001_2.jpg' → 'actor/0001_2.jpg'."""
  parts = line.strip().replace('\\', '/').split('/')
  return '/'.join(parts[-2:])


def _lines(path) -> list[str]:
  return [l.strip() for l in pathlib.Path(path).read_text(encoding='utf-8').splitlines() if l.strip()]


def split_rows(root) -> tuple[list[str], dict[str, np.ndarray]]:
  """(all image keys, {split: their rows in the all-image files})."""
  everything = [image_key(l) for l in _lines(find(root, 'Imagelist.txt'))]
  position = {k: i for i, k in enumerate(everything)}
  rows = {}
  for split, prefix in SPLITS.items():
    path = find(root, f'{prefix}Imagelist.txt')
    keys = [image_key(l) for l in _lines(path)]
    missing = [k for k in keys if k not in position]
    if missing:
      raise DataError(path, None, f'{len(missing)} images not in Imagelist.txt, e.g. {missing[0]}')
    rows[split] = np.array([position[k] for k in keys], np.int64)
  return everything, rows


def _per_split(root, all_name: str, split_names: dict[str, str], rows, num_images: int):
  """{split: matrix} from the all-image file, else from the per-split files."""
  whole = find(root, all_name, required=False)
  if whole is not None:
    matrix = read_matrix(whole, num_images)
    return {s: matrix[r] for s, r in rows.items()}
  out = {}
  for split, name in split_names.items():
    out[split] = read_matrix(find(root, name), len(rows[split]))
  return out


def read_labels(root, kind: str, rows, num_images: int) -> tuple[list[str], dict[str, np.ndarray]]:
  """(label names, {split: n×Y 0/1 matrix})."""
  if kind == 'tags1k':
    names = _lines(find(root, 'TagList1k.txt'))
    mats = _per_split(root, 'AllTags1k.txt', {s: f'{p}_Tags1k.dat' for s, p in SPLITS.items()},
                      rows, num_images)
  elif kind == 'concepts81':
    names = _lines(find(root, 'Concepts81.txt'))
    columns = [read_matrix(find(root, f'Labels_{c}.txt'), num_images)[:, 0] for c in names]
    matrix = np.stack(columns, 1)
    mats = {s: matrix[r] for s, r in rows.items()}
  else:
    raise ValueError(f'NUS-WIDE labels {kind!r}: expected one of {LABELS}')
  for split, m in mats.items():
    if m.shape[1] != len(names):
      raise DataError(root, None, f'{split} labels have {m.shape[1]} columns for {len(names)} names')
  return names, mats


def read_splits(root, labels: str = 'tags1k', features=FEATURES):
  """({'train', 'test'}: the chosen feature files side by side, stored sparse;
  {split: image names in row order})."""
  everything, rows = split_rows(root)
  names, label_mats = read_labels(root, labels, rows, len(everything))
  blocks = {s: [] for s in SPLITS}
  for name in features:
    per_split = _per_split(root, f'{name}.dat', {s: f'{p}_{name}.dat' for s, p in SPLITS.items()},
                           rows, len(everything))
    for split, m in per_split.items():
      blocks[split].append(m)
  out = {}
  for split in SPLITS:
    X = np.concatenate(blocks[split], 1)
    feats = [(np.flatnonzero(x), x[x != 0]) for x in X]
    out[split] = from_lists(feats, [np.flatnonzero(y > 0) for y in label_mats[split]], X.shape[1],
                            names)
  return out, {s: [everything[i] for i in r] for s, r in rows.items()}

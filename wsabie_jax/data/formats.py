"""The file formats a run can train on (config.data.kind), registered once.

Training (data.load_splits), annotate.py's --input and the config's data
section all read this table: a new format is a reader module and one entry
here. Each entry reads one file of the format; `num_features` and
`label_names`, when given, are the sizes of the run or training file the
file must match (a test file, an annotation input).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from wsabie_jax.data import dataset, libsvm, mulan
from wsabie_jax.data.dataset import SparseDataset


@dataclasses.dataclass(frozen=True)
class Format:
  suffix: str | None            # the file name's ending (None: any)
  description: str              # what a file of it is, for an error naming the wrong one
  # (data section, path, num_features, label_names, skip_empty) -> the file's examples
  read: Callable[..., SparseDataset]


def _mulan(cfg, path, num_features, label_names, skip_empty) -> SparseDataset:
  del num_features, label_names  # (its attributes and label XML give both)
  return mulan.read_arff(path, cfg.labels_path, skip_empty=skip_empty)


def _libsvm(cfg, path, num_features, label_names, skip_empty) -> SparseDataset:
  if label_names is None and cfg.labels_path:
    label_names = dataset.read_label_names(cfg.labels_path)
  return libsvm.read_libsvm(path, num_features=num_features,
                            num_labels=len(label_names) if label_names else None,
                            label_names=label_names, feature_base=cfg.feature_base,
                            skip_empty=skip_empty)


FORMATS = {
    'mulan': Format('.arff', 'a Mulan .arff file with its attributes', _mulan),
    'libsvm': Format(None, 'libsvm text ("labels feature:value ..."), as the training file',
                     _libsvm),
}


def of_path(path: str) -> str:
  """The format a file's name says: the one whose suffix it ends with, else
  the one without a suffix."""
  return next((kind for kind, f in FORMATS.items() if f.suffix and str(path).endswith(f.suffix)),
              next(kind for kind, f in FORMATS.items() if f.suffix is None))


def read(cfg, path, num_features: int | None = None, label_names=None,
         skip_empty: bool = True) -> SparseDataset:
  """One file of `cfg.kind`'s format."""
  return FORMATS[cfg.kind].read(cfg, path, num_features, label_names, skip_empty)

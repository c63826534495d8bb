"""Dense features shifted by the training file's mean (and optionally scaled
by its standard deviation) before the per-image normalisation
(`data.standardize`).

Where every image holds (nearly) every feature and the values are of one
sign — scene's 294 colour moments in [0, 1] — each image's vector is
mostly the mean image: after the unit norm every pair of images has a cosine
near 1 and what tells them apart is a small residue. Subtracting the mean
first leaves that residue, which is what a linear scorer can rank by
(docs/RESULTS.md "Centred dense features": scene +0.017 p@1 over five folds
of its training file, yeast +0.003). A sparse set (text, bags of visual
words) would become dense, so 'auto' centres only where the training file's
images hold at least DENSE of the features on average.

  'none'    the values as read
  'center'  x − mean
  'z'       (x − mean) / std (a feature of std 0: / 1)
  'auto'    'center' where dense (DENSE), else 'none'

The statistics come from the training file as read (its validation split
included: they use no labels), travel with the training set
(`SparseDataset.standardized`) into the run's vocabulary.json, where
annotate.py reads them back for new examples; evaluate.py recomputes them
from the same training file (its fingerprint is checked).
"""
from __future__ import annotations

import dataclasses

import numpy as np

KINDS = ('none', 'center', 'z', 'auto')
DENSE = 0.5  # 'auto' centres where the mean image holds ≥ this share of the features


@dataclasses.dataclass(frozen=True)
class Standardization:
  kind: str                # 'center' | 'z'
  mean_d: np.ndarray       # (d,) float32: the training file's mean of each feature
  scale_d: np.ndarray      # (d,) float32: the divisor (ones for 'center')

  def to_json(self) -> dict:
    return {'kind': self.kind, 'mean': self.mean_d.tolist(), 'scale': self.scale_d.tolist()}

  @classmethod
  def from_json(cls, saved: dict | None) -> 'Standardization | None':
    if not saved:
      return None
    return cls(saved['kind'], np.asarray(saved['mean'], np.float32),
               np.asarray(saved['scale'], np.float32))


def resolve(kind: str, ds) -> str:
  """The kind 'auto' stands for on training data `ds` ('center' or 'none')."""
  if kind not in KINDS:
    raise ValueError(f'data.standardize must be one of {KINDS}, got {kind!r}')
  if kind != 'auto':
    return kind
  if not hasattr(ds, 'feat_idx'):  # (streamed shards: never read whole, never shifted)
    return 'none'
  density = len(ds.feat_idx) / max(1, ds.num_images * ds.num_features)
  return 'center' if density >= DENSE else 'none'


def fit(ds, kind: str) -> Standardization | None:
  """The statistics of `kind` on training data `ds` (None for 'none')."""
  kind = resolve(kind, ds)
  if kind == 'none':
    return None
  n = max(1, ds.num_images)
  vals = ds.feat_val.astype(np.float64)
  mean = np.bincount(ds.feat_idx, weights=vals, minlength=ds.num_features) / n
  scale = np.ones(ds.num_features)
  if kind == 'z':  # (the features an image leaves out are zeros)
    var = np.bincount(ds.feat_idx, weights=vals ** 2, minlength=ds.num_features) / n - mean ** 2
    std = np.sqrt(np.maximum(var, 0.0))
    scale = np.where(std > 1e-12, std, 1.0)
  return Standardization(kind, mean.astype(np.float32), scale.astype(np.float32))


def apply(ds, standardization: Standardization):
  """`ds` with every feature stored (n × d values) and shifted and scaled."""
  d = standardization.mean_d.shape[0]
  if ds.num_features != d:
    raise ValueError(f'{ds.num_features:,} features to standardise with statistics of {d:,}')
  n = ds.num_images
  X = (ds.dense_features() - standardization.mean_d) / standardization.scale_d
  return dataclasses.replace(
      ds, feat_indptr=np.arange(n + 1, dtype=np.int64) * d,
      feat_idx=np.tile(np.arange(d, dtype=np.int32), n), feat_val=X.ravel(),
      standardized=standardization)

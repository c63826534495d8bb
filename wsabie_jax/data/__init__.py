"""Data, the bottom layer: readers, the synthetic generator, batching, shards,
tfds builders; `load_splits` reads a config's data section. Imports nothing
of the package outside data/."""
from __future__ import annotations

import dataclasses
import os

import pathlib

import numpy as np

from wsabie_jax.data import batching, dataset, formats, settings, shards, standardize, synthetic
from wsabie_jax.data.dataset import DataError, SparseDataset
from wsabie_jax.data.settings import KINDS


def synthetic_spec(cfg) -> synthetic.SyntheticSpec:
  """The planted world of a synthetic (or shards) data section."""
  return settings.of(cfg).synthetic


# The last training file read, by its path, size, time and reading settings: a
# config that fits B, Q and K to the data (configs/wsabie_mulan.py) reads it
# while the flags are parsed, and the run reads it again (200 MB once took 106 s).
_LAST_READ: dict = {}


def read_split(cfg, path, like: SparseDataset | None = None, skip_empty: bool = True) -> SparseDataset:
  """Reads one file of a file-backed data config (test files take sizes from
  train); a training file read just before, unchanged, is not parsed again."""
  cfg = settings.of(cfg)
  if not os.path.exists(path):
    raise DataError(path, None, 'file not found (set config.data paths)')
  if like is None:
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns, cfg.kind,
           cfg.labels_path, cfg.feature_base, skip_empty)
    if key not in _LAST_READ:
      _LAST_READ.clear()
      _LAST_READ[key] = _read(cfg, path, None, skip_empty)
    return _LAST_READ[key]
  return _read(cfg, path, like, skip_empty)


def _read(cfg, path, like: SparseDataset | None, skip_empty: bool) -> SparseDataset:
  if cfg.kind not in formats.FORMATS:
    raise ValueError(f'config.data.kind={cfg.kind!r} is not a file format '
                     f'({", ".join(formats.FORMATS)})')
  return formats.read(cfg, path, like.num_features if like else None,
                      like.label_names if like else None, skip_empty)


def preprocess(ds: SparseDataset, cfg, standardized: standardize.Standardization | None = None
               ) -> SparseDataset:
  """The training file's shift and scale where given (data.standardize), the
  per-image normalisation, then the optional constant bias feature."""
  if standardized is not None:
    ds = standardize.apply(ds, standardized)
  ds = dataset.normalize(ds, cfg.normalize)
  if cfg.bias_feature:
    ds = dataset.add_bias_feature(ds, cfg.bias_feature)
  return ds


def load_splits(cfg):
  """(train, valid, test) from config.data; valid is carved from train.

  For data.kind='shards', train is a ShardSet streamed from disk and the
  shard directory's valid/ and test/ sets are read whole. Synthetic data in
  WordNet mode names its labels by noun synsets (data/wordnet.py).
  """
  cfg = settings.of(cfg)  # (checked: kinds, fractions, protocol with features)
  if cfg.kind == 'shards':
    if cfg.standardize not in ('none', 'auto'):  # ('auto': streamed shards are not read whole)
      raise ValueError(f"data.standardize={cfg.standardize!r} needs the training file read whole; "
                       "shards take 'none'")
    root = pathlib.Path(cfg.shards_dir)
    prep = lambda ds: preprocess(ds, cfg)
    train = shards.ShardSet(root / 'train', prep)
    return train, shards.ShardSet(root / 'valid', prep).load_all(), \
        shards.ShardSet(root / 'test', prep).load_all()
  if cfg.kind == 'tfds':  # a tfds builder (data/tfds_builders.py) prepared from manual_dir
    from wsabie_jax.data import tfds_builders
    builder = tfds_builders.prepare(cfg.tfds_name, cfg.data_dir, cfg.manual_dir)
    train, test = tfds_builders.load(builder, 'train'), tfds_builders.load(builder, 'test')
  elif cfg.kind == 'synthetic':
    spec = cfg.synthetic
    world = synthetic.make_world(spec, synthetic_vocabulary(spec))
    train = synthetic.generate(spec, cfg.num_train, 'train', world=world)
    test = synthetic.generate(spec, cfg.num_test, 'test', world=world)
  else:
    train = read_split(cfg, cfg.train_path)
    if train.num_images == 0:
      raise DataError(cfg.train_path, None, 'no examples with labels to train on'
                      + (f' ({train.skipped_empty} without labels skipped)'
                         if train.skipped_empty else ''))
    test = read_split(cfg, cfg.test_path, like=train)
    if test.num_images == 0:
      raise DataError(cfg.test_path, None, 'no examples with labels to test on')
    if test.num_features != train.num_features or test.label_names != train.label_names:
      raise DataError(cfg.test_path, None, 'features or labels differ from the training file')
  # The training file's statistics, before the split; every split below keeps
  # them (SparseDataset.standardized, through dataclasses.replace).
  shift = standardize.fit(train, cfg.standardize)
  train, test = preprocess(train, cfg, shift), preprocess(test, cfg, shift)
  if cfg.protocol == 'leave_one_out':
    return leave_one_out_splits(dataset.concat([train, test]), cfg)
  train, valid = dataset.split_validation(train, cfg.validation_fraction, cfg.split_seed)
  if cfg.validation_fraction and valid.num_images == 0:
    raise DataError(_training_data(cfg), None,
                    f'the validation split is empty ({train.num_images} examples × '
                    f'config.data.validation_fraction={cfg.validation_fraction} < 1): add data, '
                    'or set validation_fraction=0 (no early stopping: the last state is kept)')
  if train.num_images == 0:
    raise DataError(_training_data(cfg), None,
                    f'no training examples are left after the validation split '
                    f'(config.data.validation_fraction={cfg.validation_fraction}): lower it')
  if cfg.holdout_fraction:
    return hold_out(train, valid, test, cfg.holdout_fraction, cfg.split_seed)
  return train, valid, test


def synthetic_vocabulary(spec: synthetic.SyntheticSpec) -> synthetic.Vocabulary | None:
  """The synsets naming a planted world's labels in WordNet mode (None otherwise)."""
  if spec.vocabulary != 'wordnet':
    return None
  from wsabie_jax.data import wordnet  # (nltk and the WordNet files only where asked for)
  return wordnet.synthetic_vocabulary(spec.num_labels)


def _training_data(cfg: settings.DataConfig) -> str:
  return cfg.train_path if isinstance(cfg, settings.FileData) else 'the training data'


def leave_one_out_splits(images, cfg):
  """Paper 003's protocol over all images: train on every label but one held out
  per image (with ≥ 2 labels); the held-out images split in halves, valid and
  test, each ranked without the labels training knows them by."""
  if cfg.features == 'image_id':
    images = dataset.image_id_features(images)
  train, held = dataset.leave_one_out(images, cfg.split_seed)
  order = np.random.default_rng([cfg.split_seed, 19]).permutation(held.num_images)
  half = held.num_images // 2
  return train, held.subset(np.sort(order[:half])), held.subset(np.sort(order[half:]))


def hold_out(train, valid, test, fraction: float, seed: int):
  """Zero-shot splits (paper 004 Table 2): a random `fraction` of the labels
  moves to the end of the vocabulary and out of train and valid (images left
  unlabelled are dropped); test keeps every label."""
  order, num_seen = dataset.hold_out_labels(train.num_labels, fraction, seed)
  test = dataset.select_labels(test, order, drop_unlabelled=False)
  vocabulary = dict(label_names=test.label_names, label_parents=test.label_parents,
                    num_seen_labels=num_seen)
  seen_only = lambda ds: dataclasses.replace(dataset.select_labels(ds, order[:num_seen]), **vocabulary)
  return seen_only(train), seen_only(valid), dataclasses.replace(test, num_seen_labels=num_seen)


def pair_stream(train, batch_size: int, seed: int, packs: int = 1, positives_per_row: int = 1):
  """The training pairs of an in-memory data set (non-zeros packed in `packs`
  packs: one a device; up to `positives_per_row` of an image's pairs a row)
  or of a shard set on disk (padded images, one pair a row)."""
  if isinstance(train, shards.ShardSet):
    if positives_per_row != 1:
      raise ValueError(f'train.positives_per_row={positives_per_row}: a shard set on disk '
                       'streams one pair a row; set it to 1')
    return shards.ShardedPairStream(train, batch_size, seed)
  return batching.PairStream(train, batch_size, seed, packs, positives_per_row)


COREL5K_DIR = pathlib.Path(__file__).parent / 'files' / 'corel5k'


def corel5k_paths() -> tuple[str, str, str]:
  """(train ARFF, test ARFF, labels XML) of the Corel5k copy shipped in the package."""
  return tuple(str(COREL5K_DIR / name) for name in
               ('Corel5k-train-sparse.arff', 'Corel5k-test-sparse.arff', 'Corel5k.xml'))

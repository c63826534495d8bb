"""tfds builders for the papers' real data, read from `manual_dir` (never downloaded).

  LearIccv09  configs corel5k / espgame / iaprtc12: LEAR's iccv09 features and
              annotations (data/lear.py for the file formats).
  Mulan       configs named after Mulan data sets (corel5k, …): <Name>-train*.arff,
              <Name>-test*.arff and <Name>.xml (data/mulan.py).
  NusWide     configs tags1k / concepts81: the release's low-level features and
              tag / concept matrices (data/nuswide.py).
  OpenImages  image-level label CSVs joined to a features file of the user's
              (data/openimages.py); splits train, validation, test.

Each example is one image: `feat_idx`, `feat_val` (its sparse bag), `labels`
(label ids) and `image` (its name); the label names and the feature count
sit in `info.metadata`. Datasets are written as ArrayRecord, which needs no
TensorFlow; `load` turns a prepared split back into a SparseDataset.
"""
from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds

from wsabie_jax.data import lear, mulan, nuswide, openimages
from wsabie_jax.data.dataset import DataError, SparseDataset, from_lists


def _features():
  return tfds.features.FeaturesDict({
      'feat_idx': tfds.features.Tensor(shape=(None,), dtype=np.int32),
      'feat_val': tfds.features.Tensor(shape=(None,), dtype=np.float32),
      'labels': tfds.features.Tensor(shape=(None,), dtype=np.int32),
      'image': tfds.features.Text()})


class _SparseImages:
  """What both builders share: the features, the metadata, one example per image."""

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(builder=self, features=_features(),
                                 metadata=tfds.core.MetadataDict(),
                                 disable_shuffling=True)  # the files' image order

  def _splits(self, splits: dict, image_names: dict | None = None) -> dict:
    """Generators for {split: SparseDataset}; label names and feature count into the metadata."""
    self.info.metadata.update(label_names=splits['train'].label_names,
                              num_features=int(splits['train'].num_features))
    names = image_names or {s: [str(i) for i in range(ds.num_images)] for s, ds in splits.items()}
    return {s: self._generate_examples(ds, names[s]) for s, ds in splits.items()}

  def _generate_examples(self, ds: SparseDataset, image_names):
    for i in range(ds.num_images):
      idx, val = ds.features(i)
      yield i, {'feat_idx': idx, 'feat_val': val, 'labels': ds.labels(i), 'image': image_names[i]}


class LearIccv09(_SparseImages, tfds.core.GeneratorBasedBuilder):
  """LEAR iccv09 (Guillaumin et al. 2009): Corel5k, ESP-game, IAPR-TC12."""

  VERSION = tfds.core.Version('1.0.0')
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=n) for n in ('corel5k', 'espgame', 'iaprtc12')]
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      'Place the iccv09 files of the data set in manual_dir: <name>_dictionary.txt, '
      '<name>_{train,test}_list.txt, <name>_{train,test}_annot.hvecs and the feature files '
      '(<name>_{train,test}_DenseSiftV3H1.hvecs, …_Gist.fvec, …_HsvV3H1.hvecs32, …).')
  features_used = lear.DEFAULT_FEATURES

  def _split_generators(self, dl_manager):
    root = dl_manager.manual_dir
    splits = {s: lear.read_split(root, self.builder_config.name, s, self.features_used,
                                 skip_empty=False) for s in ('train', 'test')}
    names = {s: lear._lines(root / f'{self.builder_config.name}_{s}_list.txt') for s in splits}
    return self._splits(splits, names)


class MulanConfig(tfds.core.BuilderConfig):
  def __init__(self, *, stem: str, **kw):
    super().__init__(**kw)
    self.stem = stem  # the files' common prefix: <stem>-train*.arff, <stem>-test*.arff, <stem>.xml


class Mulan(_SparseImages, tfds.core.GeneratorBasedBuilder):
  """A Mulan multi-label data set (ARFF + label XML), e.g. Corel5k (Duygulu et al. 2002)."""

  VERSION = tfds.core.Version('1.0.0')
  BUILDER_CONFIGS = [MulanConfig(name='corel5k', stem='Corel5k')]
  MANUAL_DOWNLOAD_INSTRUCTIONS = ('Place <Name>-train.arff (or -train-sparse.arff), '
                                  '<Name>-test.arff and <Name>.xml in manual_dir.')

  def _split_generators(self, dl_manager):
    root, stem = dl_manager.manual_dir, self.builder_config.stem
    labels = root / f'{stem}.xml'
    splits = {}
    for split in ('train', 'test'):
      found = sorted(root.glob(f'{stem}-{split}*.arff'))
      if not found:
        raise DataError(root, None, f'no {stem}-{split}*.arff ({self.MANUAL_DOWNLOAD_INSTRUCTIONS})')
      splits[split] = mulan.read_arff(found[0], labels, skip_empty=False)
    return self._splits(splits)


class NusWide(_SparseImages, tfds.core.GeneratorBasedBuilder):
  """NUS-WIDE (Chua et al. 2009): 269,648 Flickr images, 1,000 tags or 81 concepts."""

  VERSION = tfds.core.Version('1.0.0')
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=n) for n in nuswide.LABELS]
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      'Unpack the NUS-WIDE release into manual_dir: ImageList (Imagelist.txt, '
      'TrainImagelist.txt, TestImagelist.txt), Low_Level_Features (Normalized_*.dat, '
      'BoW_int.dat), NUS_WID_Tags (TagList1k.txt, AllTags1k.txt) and, for concepts81, '
      'ConceptsList/Concepts81.txt and Groundtruth/AllLabels/Labels_<concept>.txt.')
  features_used = nuswide.FEATURES

  def _split_generators(self, dl_manager):
    splits, image_names = nuswide.read_splits(dl_manager.manual_dir, self.builder_config.name,
                                              self.features_used)
    return self._splits(splits, image_names)


class OpenImages(_SparseImages, tfds.core.GeneratorBasedBuilder):
  """Open Images V4–V7 image-level labels joined to the user's features."""

  VERSION = tfds.core.Version('1.0.0')
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      'Place in manual_dir the class descriptions CSV (oidv7-class-descriptions.csv or '
      'class-descriptions.csv), <split>-annotations-human-imagelabels.csv and '
      '<split>-features.txt ("ImageID idx:value ...") or <split>-features.npz '
      '(image_ids, features) for split in train, validation, test.')

  def _split_generators(self, dl_manager):
    splits, image_ids = openimages.read_splits(dl_manager.manual_dir)
    return self._splits(splits, image_ids)


BUILDERS = {'lear_iccv09': LearIccv09, 'mulan': Mulan, 'nus_wide': NusWide,
            'open_images': OpenImages}


def prepare(name: str, data_dir, manual_dir=None):
  """The builder for 'family/config' (e.g. 'lear_iccv09/corel5k'), prepared from manual_dir."""
  family, _, config = name.partition('/')
  if family not in BUILDERS:
    raise ValueError(f'tfds data {name!r}: unknown family (expected one of {sorted(BUILDERS)})')
  builder = BUILDERS[family](config=config or None, data_dir=str(data_dir), file_format='array_record')
  if not builder.is_prepared():
    if not manual_dir:
      raise DataError(data_dir, None, f'{name} is not prepared here: set config.data.manual_dir')
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir=str(manual_dir)))
  return builder


def load(builder, split: str, skip_empty: bool = True) -> SparseDataset:
  """A prepared split as a SparseDataset (images without labels skipped and counted)."""
  source = builder.as_data_source(split)
  examples = [source[i] for i in range(len(source))]
  keep = [e for e in examples if len(e['labels']) or not skip_empty]
  ds = from_lists([(e['feat_idx'], e['feat_val']) for e in keep], [e['labels'] for e in keep],
                  int(builder.info.metadata['num_features']),
                  list(builder.info.metadata['label_names']))
  ds.skipped_empty = len(examples) - len(keep)
  return ds

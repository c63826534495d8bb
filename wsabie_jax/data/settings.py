"""The config's data section, one dataclass a kind (config/schema.py reads it).

Every kind shares the fields of DataConfig (normalisation, splits, protocol);
`kind` picks the class that adds its own: the planted synthetic world, files
on disk (Mulan ARFF or libsvm), synthetic shards on disk, a tfds builder.
`of(section)` reads a config's data section into its class; the helpers
below write one out for a config file.
"""
from __future__ import annotations

import dataclasses
import pathlib

import ml_collections

from wsabie_jax.config.schema import check_choices, check_ranges, from_config, to_config
from wsabie_jax.data import formats
from wsabie_jax.data.synthetic import SyntheticSpec

PROTOCOLS = ('random', 'leave_one_out')
FEATURES = ('visual', 'image_id')
NORMALIZE = ('l2', 'log_l2', 'none')
STANDARDIZE = ('none', 'center', 'z', 'auto')  # data/standardize.py


@dataclasses.dataclass(frozen=True)
class DataConfig:
  kind: str = 'synthetic'       # KINDS below
  normalize: str = 'l2'         # per-image feature normalisation: 'l2' | 'log_l2' | 'none'
  # before it, the training file's mean subtracted ('center'), and its std
  # divided ('z'); 'auto': 'center' where the features are dense (data/standardize.py)
  standardize: str = 'none'
  bias_feature: float = 0.0     # > 0: a constant extra feature (a learnt label prior)
  validation_fraction: float = 0.1  # carved from train, for model selection
  split_seed: int = 0
  holdout_fraction: float = 0.0  # > 0: labels held out of training (zero-shot, paper 004 Table 2)
  # 'random' image splits | 'leave_one_out': one label of each image (≥ 2 labels)
  # held out, half for valid, half for test; its other labels are left out of
  # its ranking (paper 003)
  protocol: str = 'random'
  features: str = 'visual'      # 'visual' | 'image_id': one embedding per image (paper 003)

  def __post_init__(self):
    check_choices(self, {'kind': KINDS, 'normalize': NORMALIZE, 'standardize': STANDARDIZE,
                         'protocol': PROTOCOLS, 'features': FEATURES})
    check_ranges(self, 'data', validation_fraction='[0,1)', holdout_fraction='[0,1)',
                 bias_feature='>=0', split_seed='>=0')
    if self.features == 'image_id' and self.protocol != 'leave_one_out':
      raise ValueError("data.features='image_id' needs data.protocol='leave_one_out' (image ids "
                       'are shared only by the held-out copy of a training image)')
    if self.protocol == 'leave_one_out' and self.holdout_fraction:
      raise ValueError("data.protocol='leave_one_out' and data.holdout_fraction (zero-shot) "
                       'do not combine')


# The embedded default world (data/synthetic.py): Y = 2,000, d = 10,000.
DEFAULT_WORLD = SyntheticSpec(num_labels=2000, num_features=10_000, signal=0.35)


@dataclasses.dataclass(frozen=True)
class SyntheticData(DataConfig):
  """The planted world of data/synthetic.py, generated at the start of a run."""
  num_train: int = 50_000
  num_test: int = 5_000
  synthetic: SyntheticSpec = DEFAULT_WORLD

  def __post_init__(self):
    super().__post_init__()
    check_ranges(self, 'data', num_train='>=1', num_test='>=0')
    check_ranges(self.synthetic, 'data.synthetic', num_labels='>=1', num_features='>=1',
                 nnz='>=1', max_labels='>=1', group_size='>=1', words_per_label='>=1',
                 signal='[0,1]', sibling_share='[0,1]', sibling_labels='[0,1]')


@dataclasses.dataclass(frozen=True)
class FileData(DataConfig):
  """Files on disk in one of data/formats.py's formats: kind 'mulan' (ARFF +
  label XML) or 'libsvm' (multi-label libsvm / XMC text; labels_path: one
  label name a line, optional)."""
  kind: str = 'mulan'
  train_path: str = ''
  test_path: str = ''
  labels_path: str = ''
  feature_base: int = 0         # libsvm: the id of the first feature (0 XMC, 1 libsvm)
  featurized_dir: str = ''      # launch/featurize.py's output: annotate.py --images reads it

  def __post_init__(self):
    super().__post_init__()
    if self.kind not in formats.FORMATS:
      raise ValueError(f"data.kind={self.kind!r}: files are one of {tuple(formats.FORMATS)}")
    if not self.train_path or not self.test_path:
      raise ValueError(f'data.kind={self.kind!r} needs data.train_path and data.test_path')
    check_ranges(self, 'data', feature_base='>=0')


@dataclasses.dataclass(frozen=True)
class ShardsData(SyntheticData):
  """A synthetic world written to disk by launch/make_shards.py and streamed."""
  kind: str = 'shards'
  shards_dir: str = ''
  num_valid: int = 10_000
  shard_size: int = 250_000

  def __post_init__(self):
    super().__post_init__()
    if not self.shards_dir:
      raise ValueError("data.kind='shards' needs data.shards_dir")
    check_ranges(self, 'data', num_valid='>=0', shard_size='>=1')


@dataclasses.dataclass(frozen=True)
class TfdsData(DataConfig):
  """A tfds builder of data/tfds_builders.py, prepared from files in manual_dir."""
  kind: str = 'tfds'
  tfds_name: str = ''
  data_dir: str = ''
  manual_dir: str = ''

  def __post_init__(self):
    super().__post_init__()
    if not self.tfds_name or not self.data_dir:
      raise ValueError("data.kind='tfds' needs data.tfds_name and data.data_dir")


# Every file format of data/formats.py is read through FileData's paths.
CLASSES = {'synthetic': SyntheticData, **{kind: FileData for kind in formats.FORMATS},
           'shards': ShardsData, 'tfds': TfdsData}
KINDS = tuple(CLASSES)


def of(section, where: str = 'config.data') -> DataConfig:
  """A config's data section as its kind's dataclass (ValueError naming a bad field)."""
  if isinstance(section, DataConfig):
    return section
  kind = section['kind'] if 'kind' in section else DataConfig.kind
  if kind not in CLASSES:
    raise ValueError(f'{where}.kind={kind!r} is not one of {KINDS}')
  return from_config(CLASSES[kind], section, where)


def synthetic_data(small: bool = False, **spec) -> ml_collections.ConfigDict:
  """The embedded planted world: 50,000 / 5,000 images, Y = 2,000, d = 10,000;
  `small`: 4,000 / 500 images, Y = 200, d = 1,000."""
  c = to_config(SyntheticData)
  if small:
    c.update(num_train=4000, num_test=500)
    c.synthetic.update(num_labels=200, num_features=1000, signal=0.5)
  c.synthetic.update(spec)
  return c


def file_data(kind: str, train_path: str, test_path: str, labels_path: str = '',
              **fields) -> ml_collections.ConfigDict:
  """Files on disk: kind 'mulan' or 'libsvm' (FileData)."""
  if kind not in ('mulan', 'libsvm'):
    raise ValueError(f"file_data: kind={kind!r} is not 'mulan' or 'libsvm'")
  return to_config(FileData, kind=kind, train_path=train_path, test_path=test_path,
                   labels_path=labels_path, **fields)


def mulan_folder(folder: str, **fields) -> ml_collections.ConfigDict:
  """file_data of a folder laid out as Mulan distributes a data set:
  NAME-train.arff, NAME-test.arff and a label XML."""
  folder = pathlib.Path(folder)
  trains = sorted(folder.glob('*-train.arff')) if folder.is_dir() else []
  xmls = sorted(folder.glob('*.xml')) if folder.is_dir() else []
  if len(trains) != 1 or not xmls:
    raise ValueError(f'{folder}: expected one NAME-train.arff, its NAME-test.arff and NAME.xml '
                     f'(Mulan layout); found {[p.name for p in trains + xmls]}')
  stem = trains[0].name[:-len('-train.arff')]
  return file_data('mulan', str(trains[0]), str(folder / f'{stem}-test.arff'), str(xmls[0]),
                   **fields)


def shards_data(shards_dir: str, **fields) -> ml_collections.ConfigDict:
  """A synthetic world in shards on disk (ShardsData); `fields` set its sizes."""
  return to_config(ShardsData, shards_dir=shards_dir, **fields)


def tfds_data(name: str, data_dir: str, manual_dir: str = '') -> ml_collections.ConfigDict:
  """A tfds builder of data/tfds_builders.py, prepared from files in manual_dir."""
  return to_config(TfdsData, tfds_name=name, data_dir=data_dir, manual_dir=manual_dir)

"""data.standardize (data/standardize.py): the training file's mean (and std)
against numpy on the dense matrix, 'auto' by density, the same shift on the
test file, in the run's vocabulary.json and in annotate.py's reading."""
import json
import types

import ml_collections
import numpy as np
import pytest

from wsabie_jax.api import annotate
from wsabie_jax.benchmarks import panel
from wsabie_jax.data import dataset, libsvm, load_splits, settings, standardize
from wsabie_jax.methods import common
from wsabie_jax.wsabie import fitting


def _dense_set(rng, n: int, d: int, zeros: float = 0.1) -> dataset.SparseDataset:
  """n images over d non-negative features, a few zeros left out as sparse files do."""
  X = rng.uniform(0.2, 1.0, (n, d)) * (rng.random((n, d)) > zeros)
  rows = [(np.flatnonzero(x), x[x > 0]) for x in X]
  labels = [rng.choice(4, size=1 + i % 2, replace=False) for i in range(n)]
  return dataset.from_lists(rows, labels, d, ['a', 'b', 'c', 'd'])


def _dense(ds) -> np.ndarray:
  X = np.zeros((ds.num_images, ds.num_features))
  X[np.repeat(np.arange(ds.num_images), np.diff(ds.feat_indptr)), ds.feat_idx] = ds.feat_val
  return X


def test_center_and_z_against_numpy_on_the_dense_matrix():
  ds = _dense_set(np.random.default_rng(0), 50, 7)
  X = _dense(ds)
  X[:, 3] = 0.0  # a feature no image holds: std 0, divided by 1
  ds = dataset.from_lists([(np.flatnonzero(x), x[x != 0]) for x in X],
                          [ds.labels(i) for i in range(ds.num_images)], 7, ds.label_names)
  for kind, want in (('center', X - X.mean(0)),
                     ('z', (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0))):
    shift = standardize.fit(ds, kind)
    out = standardize.apply(ds, shift)
    np.testing.assert_allclose(_dense(out), want, atol=1e-5)
    assert np.diff(out.feat_indptr).tolist() == [7] * 50  # every feature stored
    assert out.standardized is shift and shift.kind == kind
  assert standardize.fit(ds, 'none') is None


def test_auto_centres_dense_features_only():
  rng = np.random.default_rng(1)
  assert standardize.resolve('auto', _dense_set(rng, 40, 20, zeros=0.3)) == 'center'
  assert standardize.resolve('auto', _dense_set(rng, 40, 20, zeros=0.7)) == 'none'
  assert standardize.resolve('z', _dense_set(rng, 40, 20, zeros=0.7)) == 'z'
  with pytest.raises(ValueError, match="data.standardize must be one of"):
    standardize.resolve('mean', _dense_set(rng, 4, 2))
  with pytest.raises(ValueError, match="standardize"):
    settings.of(settings.file_data('libsvm', 'a', 'b', standardize='mean'))


@pytest.fixture
def dense_files(tmp_path):
  rng = np.random.default_rng(2)
  train, test = _dense_set(rng, 60, 9), _dense_set(rng, 20, 9)
  libsvm.write_libsvm(train, tmp_path / 'train.txt')
  libsvm.write_libsvm(test, tmp_path / 'test.txt')
  return tmp_path, train, test


def test_splits_take_the_training_files_shift_and_the_vocabulary_keeps_it(dense_files):
  """Train, valid and test are shifted by the training file's mean (before the
  validation split), then normalised; the vocabulary holds the statistics."""
  folder, raw_train, raw_test = dense_files
  data = settings.file_data('libsvm', str(folder / 'train.txt'), str(folder / 'test.txt'),
                            normalize='l2', standardize='auto', validation_fraction=0.2)
  train, valid, test = load_splits(data)
  mean = _dense(raw_train).mean(0)
  unit = lambda X: X / np.linalg.norm(X, axis=1, keepdims=True)
  np.testing.assert_allclose(_dense(test), unit(_dense(raw_test) - mean), atol=1e-5)
  assert train.num_images + valid.num_images == 60
  np.testing.assert_allclose(train.standardized.mean_d, mean, rtol=1e-5)
  saved = json.loads(json.dumps(common.vocabulary(train)))  # (as vocabulary.json holds it)
  assert saved['standardized']['kind'] == 'center'
  # annotate.py reads a file as the run's test file was read
  config = ml_collections.ConfigDict({'data': data.to_dict()})
  config.data.standardize = 'center'  # (as the run's config.json records 'auto')
  got = annotate.read_input(str(folder / 'test.txt'), config, saved)
  np.testing.assert_allclose(_dense(got), _dense(test), atol=1e-6)
  del saved['standardized']
  with pytest.raises(Exception, match='no statistics'):
    annotate.read_input(str(folder / 'test.txt'), config, saved)


def test_the_mulan_config_records_the_resolved_kind(dense_files):
  """configs/wsabie_mulan.py's 'auto': 'center' on dense features, 'none' on
  sparse ones, written into the fitted config (config.json)."""
  folder, _, _ = dense_files
  data = settings.file_data('libsvm', str(folder / 'train.txt'), str(folder / 'test.txt'))
  config = panel.on_data('configs/wsabie_mulan.py', data)
  assert config.data.standardize == 'auto'
  assert fitting.resolve(config, load_splits(config.data)[0])[1]['data.standardize'] == 'center'
  sparse = panel.on_data('configs/wsabie_mulan.py', panel.data_config('corel5k')[1])
  assert fitting.resolve(sparse, load_splits(sparse.data)[0])[1]['data.standardize'] == 'none'


def test_shards_refuse_a_shift_and_auto_leaves_them_as_read(tmp_path):
  data = ml_collections.ConfigDict(dict(kind='shards', shards_dir=str(tmp_path),
                                        standardize='center'))
  with pytest.raises(ValueError, match="shards take 'none'"):
    load_splits(data)
  streamed = types.SimpleNamespace(num_images=10, num_features=4)  # (a ShardSet's sizes only)
  assert standardize.resolve('auto', streamed) == 'none'

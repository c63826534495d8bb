"""LEAR iccv09 files in their exact binary layout, read directly and through the tfds builder."""
import ml_collections
import numpy as np
import pytest

from wsabie_jax.data import DataError, lear, load_splits


def _fixture(root, name='corel5k'):
  rng = np.random.default_rng(0)
  labels = ['sky', 'water', 'tree', 'people']
  (root / f'{name}_dictionary.txt').write_text('\n'.join(labels) + '\n')
  want = {}
  for split, n in (('train', 12), ('test', 5)):
    (root / f'{name}_{split}_list.txt').write_text(''.join(f'{split}/{i}\n' for i in range(n)))
    annot = (rng.random((n, 4)) < 0.4).astype(np.uint16)
    annot[0] = 0  # an image without labels
    annot[1:, 0] |= annot[1:].sum(1) == 0
    sift = rng.integers(0, 3, (n, 6)).astype(np.uint16)
    gist = rng.normal(size=(n, 3)).astype(np.float32)
    hsv = rng.integers(0, 2, (n, 5)).astype(np.uint32)
    for suffix, array in (('annot.hvecs', annot), ('DenseSiftV3H1.hvecs', sift),
                          ('Gist.fvec', gist), ('HsvV3H1.hvecs32', hsv)):
      lear.write_vectors(root / f'{name}_{split}_{suffix}', array)
    want[split] = (annot, np.concatenate([sift, gist, hsv], 1).astype(np.float32))
  return labels, want


FEATURES = ('DenseSiftV3H1.hvecs', 'Gist.fvec', 'HsvV3H1.hvecs32')


def test_vector_files_byte_layout(tmp_path):
  path = tmp_path / 'x_Gist.fvec'
  lear.write_vectors(path, np.array([[1.5, -2.0]], np.float32))
  assert path.read_bytes() == np.array([2], '<i4').tobytes() + np.array([1.5, -2.0], '<f4').tobytes()
  h = tmp_path / 'x_a.hvecs'
  lear.write_vectors(h, np.array([[3, 4, 5]], np.uint16))
  assert h.read_bytes() == np.array([3, 3, 4, 5], '<u2').tobytes()


def test_read_split_and_bad_files(tmp_path):
  labels, want = _fixture(tmp_path)
  ds = lear.read_split(tmp_path, 'corel5k', 'train', FEATURES)
  annot, X = want['train']
  assert ds.label_names == labels and ds.num_features == 14 and ds.skipped_empty == 1
  assert ds.num_images == 11
  for i in range(11):
    idx, val = ds.features(i)
    dense = np.zeros(14, np.float32)
    dense[idx] = val
    np.testing.assert_allclose(dense, X[i + 1])
    assert list(ds.labels(i)) == list(np.flatnonzero(annot[i + 1]))
  bad = tmp_path / 'corel5k_train_DenseSiftV3H1.hvecs'
  bad.write_bytes(bad.read_bytes()[:-2])
  with pytest.raises(DataError, match='DenseSiftV3H1.hvecs: .* not a whole number'):
    lear.read_split(tmp_path, 'corel5k', 'train', FEATURES)


def test_tfds_builder_round_trip(tmp_path):
  from wsabie_jax.data import tfds_builders
  manual = tmp_path / 'manual'
  manual.mkdir()
  labels, _ = _fixture(manual)
  tfds_builders.LearIccv09.features_used = FEATURES
  try:
    cfg = ml_collections.ConfigDict(dict(
        kind='tfds', tfds_name='lear_iccv09/corel5k', data_dir=str(tmp_path / 'tfds'),
        manual_dir=str(manual), normalize='none', validation_fraction=0.0, split_seed=0))
    train, valid, test = load_splits(cfg)
  finally:
    tfds_builders.LearIccv09.features_used = lear.DEFAULT_FEATURES
  direct = lear.read_split(manual, 'corel5k', 'train', FEATURES)
  assert train.label_names == labels and train.num_images == direct.num_images == 11
  assert train.skipped_empty == 1 and test.num_images == 4
  np.testing.assert_array_equal(train.feat_idx, direct.feat_idx)
  np.testing.assert_allclose(train.feat_val, direct.feat_val)
  np.testing.assert_array_equal(train.label_idx, direct.label_idx)


def test_mulan_builder_matches_the_arff_reader(tmp_path):
  """The real Corel5k files (shipped in the package) through tfds equal the direct reader."""
  from wsabie_jax.data import COREL5K_DIR as corel, mulan, tfds_builders
  builder = tfds_builders.prepare('mulan/corel5k', tmp_path, corel)
  got = tfds_builders.load(builder, 'test')
  want = mulan.read_arff(corel / 'Corel5k-test-sparse.arff', corel / 'Corel5k.xml')
  assert got.num_images == want.num_images == 500 and got.label_names == want.label_names
  np.testing.assert_array_equal(got.feat_idx, want.feat_idx)
  np.testing.assert_array_equal(got.label_idx, want.label_idx)

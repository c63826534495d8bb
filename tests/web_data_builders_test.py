"""NUS-WIDE and Open Images in their release formats: readers and tfds builders."""
import numpy as np
import pytest

from wsabie_jax.data import DataError, nuswide, openimages, tfds_builders

TAGS = ['sky', 'dog', 'beach']
CONCEPTS = ['animal', 'water']


def _nuswide_fixture(root):
  """7 images (4 train, 3 test), written as the release writes them."""
  rng = np.random.default_rng(0)
  keys = [f'{d}\\{i:04d}_{1000 + i}.jpg' for i, d in enumerate('actor beach dog actor dog sky sky'.split())]
  (root / 'ImageList').mkdir(parents=True)
  (root / 'ImageList' / 'Imagelist.txt').write_text(
      ''.join(f'C:\\ImageData\\Flickr\\{k}\n' for k in keys))
  train, test = [4, 0, 2, 6], [1, 5, 3]  # not in file order
  (root / 'ImageList' / 'TrainImagelist.txt').write_text(''.join(f'{keys[i]}\n' for i in train))
  (root / 'ImageList' / 'TestImagelist.txt').write_text(''.join(f'{keys[i]}\n' for i in test))
  ch = np.round(rng.random((7, 4)) * (rng.random((7, 4)) < 0.6), 6).astype(np.float32)
  bow = rng.integers(0, 3, (7, 5)).astype(np.float32)
  feats = root / 'Low_Level_Features'
  feats.mkdir()
  (feats / 'Normalized_CH.dat').write_text(''.join(' '.join(f'{v:g}' for v in r) + ' \n' for r in ch))
  for name, rows in (('Train', train), ('Test', test)):  # BoW comes split, as released
    (feats / f'{name}_BoW_int.dat').write_text(
        ''.join(' '.join(str(int(v)) for v in bow[i]) + '\n' for i in rows))
  tags = (rng.random((7, 3)) < 0.5).astype(int)
  (root / 'NUS_WID_Tags').mkdir()
  (root / 'NUS_WID_Tags' / 'TagList1k.txt').write_text('\n'.join(TAGS) + '\n')
  (root / 'NUS_WID_Tags' / 'AllTags1k.txt').write_text(
      ''.join('\t'.join(map(str, r)) + '\t\n' for r in tags))
  concepts = (rng.random((7, 2)) < 0.5).astype(int)
  (root / 'ConceptsList').mkdir()
  (root / 'ConceptsList' / 'Concepts81.txt').write_text('\n'.join(CONCEPTS) + '\n')
  (root / 'Groundtruth' / 'AllLabels').mkdir(parents=True)
  for j, c in enumerate(CONCEPTS):
    (root / 'Groundtruth' / 'AllLabels' / f'Labels_{c}.txt').write_text(
        ''.join(f'{v}\n' for v in concepts[:, j]))
  X = np.concatenate([ch, bow], 1)
  return {'train': train, 'test': test}, X, tags, concepts


FEATURES = ('Normalized_CH', 'BoW_int')


def _check(ds, rows, X, Y, names):
  assert ds.num_images == len(rows) and ds.num_features == X.shape[1] and ds.label_names == names
  for k, i in enumerate(rows):
    idx, val = ds.features(k)
    dense = np.zeros(X.shape[1], np.float32)
    dense[idx] = val
    np.testing.assert_allclose(dense, X[i], rtol=1e-6)
    assert 0 not in val
    assert list(ds.labels(k)) == list(np.flatnonzero(Y[i]))


def test_nuswide_reader_joins_lists_features_and_labels(tmp_path):
  rows, X, tags, concepts = _nuswide_fixture(tmp_path)
  for kind, Y, names in (('tags1k', tags, TAGS), ('concepts81', concepts, CONCEPTS)):
    splits, image_names = nuswide.read_splits(tmp_path, kind, FEATURES)
    for split in ('train', 'test'):
      _check(splits[split], rows[split], X, Y, names)
  assert image_names['test'][0] == 'beach/0001_1001.jpg'


def test_nuswide_errors_name_the_file(tmp_path):
  _nuswide_fixture(tmp_path)
  ch = tmp_path / 'Low_Level_Features' / 'Normalized_CH.dat'
  ch.write_text(''.join(ch.read_text().splitlines(keepends=True)[:-1]))
  with pytest.raises(DataError, match=r'Normalized_CH.dat: 6 rows, the image list has 7'):
    nuswide.read_splits(tmp_path, 'tags1k', FEATURES)
  ch.write_text('0.1 0.2\n0.3\n' * 4)
  with pytest.raises(DataError, match=r'Normalized_CH.dat: not a numeric matrix'):
    nuswide.read_splits(tmp_path, 'tags1k', FEATURES)
  with pytest.raises(DataError, match='Normalized_WT.dat not found'):
    nuswide.read_splits(tmp_path, 'tags1k', ('Normalized_WT',))
  (tmp_path / 'ImageList' / 'TestImagelist.txt').write_text('nowhere\\x.jpg\n')
  with pytest.raises(DataError, match='TestImagelist.txt: 1 images not in Imagelist.txt'):
    nuswide.split_rows(tmp_path)


def test_nuswide_tfds_builder_equals_the_reader(tmp_path):
  manual = tmp_path / 'manual'
  rows, X, _, concepts = _nuswide_fixture(manual)
  tfds_builders.NusWide.features_used = FEATURES
  try:
    builder = tfds_builders.prepare('nus_wide/concepts81', tmp_path / 'tfds', manual)
  finally:
    tfds_builders.NusWide.features_used = nuswide.FEATURES
  for split in ('train', 'test'):
    got = tfds_builders.load(builder, split, skip_empty=False)
    _check(got, rows[split], X, concepts, CONCEPTS)


MIDS = {'/m/0bt9lr': 'Dog', '/m/01yrx': 'Cat', '/m/0k4j': 'Car', '/m/09j2d': 'Clothing'}


def _openimages_fixture(root, header=True):
  root.mkdir(parents=True, exist_ok=True)
  lines = ['LabelName,DisplayName'] if header else []
  lines += [f'{m},{n}' for m, n in MIDS.items()] + ['/m/0unused,"Bow, archery"']
  (root / ('oidv7-class-descriptions.csv' if header else 'class-descriptions.csv')).write_text(
      '\n'.join(lines) + '\n')
  (root / 'train-annotations-human-imagelabels.csv').write_text(
      'ImageID,Source,LabelName,Confidence\n'
      '000a1,verification,/m/0bt9lr,1\n'
      '000a1,verification,/m/0k4j,0\n'      # verified absent: not a label
      '000b2,crowdsource-verification,/m/01yrx,1\n'
      '000b2,verification,/m/0k4j,1\n'
      '000c3,verification,/m/09j2d,1\n'
      '000d4,verification,/m/0bt9lr,0\n'   # only an absent class: no labels
      '000zz,verification,/m/0bt9lr,1\n')  # no features: skipped
  (root / 'train-features.txt').write_text('000a1 0:1.5 3:2\n000b2 1:1\n000c3 2:0.5 4:1\n000d4 4:3\n')
  (root / 'validation-annotations-human-imagelabels.csv').write_text(
      'ImageID,Source,LabelName,Confidence\n'
      'v1,verification,/m/01yrx,1\n'
      'v1,verification,/m/0unused,1\n'     # not a training class: dropped
      'v2,verification,/m/0k4j,1\n')
  np.savez(root / 'validation-features.npz', image_ids=np.array(['v2', 'v1']),
           features=np.array([[0, 0, 1, 0, 0], [2, 0, 0, 0, 1]], np.float32))


def test_openimages_reader_joins_labels_and_features(tmp_path):
  for header in (True, False):  # V7's described CSV and V4's bare one
    root = tmp_path / str(header)
    _openimages_fixture(root, header)
    splits, ids = openimages.read_splits(root)
    train, valid = splits['train'], splits['validation']
    assert set(splits) == {'train', 'validation'}
    assert train.label_names == ['Cat', 'Clothing', 'Dog', 'Car']  # in MID order
    assert ids['train'] == ['000a1', '000b2', '000c3', '000d4'] and train.skipped_empty == 1
    names = lambda ds, i: [ds.label_names[j] for j in ds.labels(i)]
    assert [names(train, i) for i in range(4)] == [['Dog'], ['Cat', 'Car'], ['Clothing'], []]
    assert train.num_features == 5
    idx, val = train.features(0)
    assert idx.tolist() == [0, 3] and val.tolist() == [1.5, 2.0]
    assert ids['validation'] == ['v1', 'v2'] and names(valid, 0) == ['Cat'] and names(valid, 1) == ['Car']
    idx, val = valid.features(0)
    assert idx.tolist() == [0, 4] and val.tolist() == [2.0, 1.0]


def test_openimages_errors_name_file_and_line(tmp_path):
  _openimages_fixture(tmp_path)
  feats = tmp_path / 'train-features.txt'
  feats.write_text('000a1 0:1.5 x\n')
  with pytest.raises(DataError, match=r'train-features.txt, line 1: feature .x. is not'):
    openimages.read_splits(tmp_path)
  feats.write_text('000a1 0:1\n000a1 1:1\n')
  with pytest.raises(DataError, match=r'line 2: image 000a1 already'):
    openimages.read_splits(tmp_path)
  labels = tmp_path / 'train-annotations-human-imagelabels.csv'
  labels.write_text('ImageID,LabelName\n')
  with pytest.raises(DataError, match='lacks ImageID, LabelName, Confidence'):
    openimages.read_splits(tmp_path)


def test_openimages_tfds_builder_equals_the_reader(tmp_path):
  manual = tmp_path / 'manual'
  _openimages_fixture(manual)
  builder = tfds_builders.prepare('open_images', tmp_path / 'tfds', manual)
  direct, _ = openimages.read_splits(manual)
  for split in ('train', 'validation'):
    got = tfds_builders.load(builder, split, skip_empty=False)
    want = direct[split]
    assert got.label_names == want.label_names and got.num_images == want.num_images
    np.testing.assert_array_equal(got.feat_idx, want.feat_idx)
    np.testing.assert_array_equal(got.feat_val, want.feat_val)
    np.testing.assert_array_equal(got.label_idx, want.label_idx)

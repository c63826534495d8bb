"""Readers (Mulan, libsvm), their errors, the synthetic generator and batching."""
import textwrap

import numpy as np
import pytest

from wsabie_jax.data import DataError, batching, dataset, libsvm, mulan, synthetic


XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="sky"></label>
<label name="animal"><label name="cat"></label><label name="dog"></label></label>
</labels>
"""
HEADER = """@relation toy
@attribute f0 numeric
@attribute 'f 1' numeric
@attribute sky {0,1}
@attribute f2 numeric
@attribute animal {0,1}
@attribute cat {0,1}
@attribute dog {0,1}
@data
"""


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(textwrap.dedent(text))
  return str(path)


def test_mulan_sparse_and_dense_agree(tmp_path):
  xml = _write(tmp_path, 'l.xml', XML)
  sparse = _write(tmp_path, 's.arff', HEADER + '{0 0.5,2 1,3 2}\n{1 1,5 1,6 1}\n{0 1}\n% c\n{4 1,3 -1}\n')
  dense = _write(tmp_path, 'd.arff', HEADER + '0.5,0,1,2,0,0,0\n0,1,0,0,0,1,1\n1,0,0,0,0,0,0\n0,0,0,-1,1,0,0\n')
  for path in (sparse, dense):
    ds = mulan.read_arff(path, xml)
    assert ds.label_names == ['sky', 'animal', 'cat', 'dog']
    assert ds.num_features == 3 and ds.num_images == 3 and ds.skipped_empty == 1
    np.testing.assert_array_equal(ds.features(0)[0], [0, 2])
    np.testing.assert_allclose(ds.features(0)[1], [0.5, 2.0])
    np.testing.assert_array_equal(ds.labels(1), [2, 3])
    np.testing.assert_array_equal(ds.features(2)[0], [2])
    np.testing.assert_array_equal(ds.labels(2), [1])
    # Nested labels in the XML are a hierarchy: cat and dog are siblings.
    np.testing.assert_array_equal(ds.label_parents[:, 0], [-1, -1, 1, 1])


@pytest.mark.parametrize('row,message', [
    ('{0 0.5,2 1', 'line 10: sparse row does not end'),
    ('{0 x}', "line 10: attribute 0: 'x' is not a number"),
    ('{9 1}', 'line 10: attribute index 9 out of range'),
    ('{0 nan,2 1}', 'line 10: attribute 0: value .* is not finite'),
    ('{0 1e39,2 1}', "line 10: attribute 0: value '1e39' overflows float32"),
    ('{2 3}', 'line 10: label attributes must be 0 or 1'),
    ('1,2,3', 'line 10: dense row has 3 values, expected 7'),
])
def test_mulan_errors_name_file_and_line(tmp_path, row, message):
  xml = _write(tmp_path, 'l.xml', XML)
  path = _write(tmp_path, 'bad.arff', HEADER + row + '\n')
  with pytest.raises(DataError, match=f'bad.arff, {message}'):
    mulan.read_arff(path, xml)


def test_mulan_label_missing_from_arff(tmp_path):
  xml = _write(tmp_path, 'l.xml', XML.replace('"dog"', '"wolf"'))
  path = _write(tmp_path, 'x.arff', HEADER + '{0 1}\n')
  with pytest.raises(DataError, match=r"x.arff, line 9: labels from .* missing as attributes: \['wolf'\]"):
    mulan.read_arff(path, xml)


def test_libsvm_reader(tmp_path):
  path = _write(tmp_path, 'x.txt', """\
      4 6 3
      0,2 1:0.5 4:2
      1 0:1
       3:1
      2,2 5:1.5
      """)
  ds = libsvm.read_libsvm(path)
  assert (ds.num_images, ds.num_features, ds.num_labels, ds.skipped_empty) == (3, 6, 3, 1)
  np.testing.assert_array_equal(ds.labels(0), [0, 2])
  np.testing.assert_array_equal(ds.labels(2), [2])  # repeated label deduplicated
  np.testing.assert_allclose(ds.features(0)[1], [0.5, 2.0])
  one_based = _write(tmp_path, 'y.txt', '1 1:1 6:2\n')
  np.testing.assert_array_equal(libsvm.read_libsvm(one_based, feature_base=1).features(0)[0], [0, 5])


@pytest.mark.parametrize('line,message', [
    ('0,a 1:1', "line 2: labels '0,a' are not"),
    ('0 1-1', "line 2: feature '1-1' is not"),
    ('0 1:x', "line 2: feature '1:x': 'x' is not a number"),
    ('0 1:inf', "line 2: feature '1:inf': value 'inf' is not finite"),
    ('0 1:-1e39', "line 2: feature '1:-1e39': value '-1e39' overflows float32"),
    ('0 7:1', 'line 2: feature id 7 out of range'),
    ('5 1:1', r'line 2: label id out of range \[0, 3\)'),
])
def test_libsvm_errors_name_file_and_line(tmp_path, line, message):
  path = _write(tmp_path, 'bad.txt', '1 6 3\n' + line + '\n')
  with pytest.raises(DataError, match=f'bad.txt, {message}'):
    libsvm.read_libsvm(path)


def test_text_files_gzipped_with_a_bom_or_crlf_read_alike(tmp_path):
  """Every reader's lines (dataset.text_lines): a gzipped file (read by its
  first bytes, whatever its name), a BOM and CRLF endings give the plain
  file's dataset and label names."""
  import codecs
  import gzip
  text = '3 6 3\n0,2 1:0.5 4:2\n1 0:1\n2 5:1.5\n'
  plain = libsvm.read_libsvm(_write(tmp_path, 'plain.txt', text))
  (tmp_path / 'zipped.txt').write_bytes(gzip.compress(text.encode()))
  (tmp_path / 'windows.txt').write_bytes(codecs.BOM_UTF8 + text.replace('\n', '\r\n').encode())
  for name in ('zipped.txt', 'windows.txt'):
    got = libsvm.read_libsvm(tmp_path / name)
    for field in ('feat_indptr', 'feat_idx', 'feat_val', 'label_indptr', 'label_idx'):
      np.testing.assert_array_equal(getattr(got, field), getattr(plain, field), err_msg=name)
  (tmp_path / 'labels.txt').write_bytes(gzip.compress('ciel\r\nété\r\n'.encode()))
  assert dataset.read_label_names(tmp_path / 'labels.txt') == ['ciel', 'été']


def test_a_byte_not_utf8_or_a_cut_gzip_names_the_file_and_line(tmp_path):
  """Were 47-51-line UnicodeDecodeError and EOFError tracebacks."""
  import gzip
  (tmp_path / 'labels.txt').write_bytes(b'sky\ncaf\xe9\n')  # Latin-1
  with pytest.raises(DataError, match=r'labels.txt, line 2: byte 0xe9 at column 4 is not UTF-8'):
    dataset.read_label_names(tmp_path / 'labels.txt')
  whole = gzip.compress(b''.join(b'0 1:1\n' for _ in range(5000)))
  (tmp_path / 'cut.txt').write_bytes(whole[:len(whole) // 2])
  with pytest.raises(DataError, match=r'cut.txt, line \d+: the gzip file is cut short'):
    libsvm.read_libsvm(tmp_path / 'cut.txt')


def test_repeated_feature_id_is_one_feature_with_the_values_summed(tmp_path):
  """`19:1 19:2` was kept as two features, so l2 normalisation saw 1² + 2², not 3²."""
  path = _write(tmp_path, 'dup.txt', '0 4:1 1:5 4:2\n1 2:1\n')
  ds = libsvm.read_libsvm(path)
  ids, vals = ds.features(0)
  np.testing.assert_array_equal(ids, [1, 4])
  np.testing.assert_allclose(vals, [5, 3])
  np.testing.assert_allclose(dataset.normalize(ds, 'l2').features(0)[1], [5 / 34 ** 0.5, 3 / 34 ** 0.5],
                             rtol=1e-6)


def test_log_l2_damps_each_value_then_scales_to_unit_norm(tmp_path):
  """data.normalize='log_l2': sign(x)·log(1 + |x|), then the unit norm (by hand)."""
  path = _write(tmp_path, 'counts.txt', '0 1:9 4:1 7:-3\n1 2:1\n')
  ds = dataset.normalize(libsvm.read_libsvm(path), 'log_l2')
  damped = np.array([np.log(10.0), np.log(2.0), -np.log(4.0)])
  np.testing.assert_allclose(ds.features(0)[1], damped / np.linalg.norm(damped), rtol=1e-6)
  np.testing.assert_allclose(ds.features(1)[1], [1.0], rtol=1e-6)
  with pytest.raises(ValueError, match="'l2', 'log_l2' or 'none'"):
    dataset.normalize(ds, 'log')


@pytest.mark.parametrize('kind', ['mulan', 'libsvm'])
def test_empty_training_file_is_blamed_on_itself(tmp_path, kind):
  """An ARFF header with no rows said only "the training set has no positive
  pairs"; an empty libsvm training file was blamed on the test file."""
  from wsabie_jax.data import settings as data_config
  from wsabie_jax.data import load_splits
  if kind == 'mulan':
    train, test = _write(tmp_path, 'tr.arff', HEADER), _write(tmp_path, 'te.arff', HEADER + '{0 1,2 1}\n')
    cfg = data_config.file_data('mulan', train, test, _write(tmp_path, 'l.xml', XML))
  else:
    train, test = _write(tmp_path, 'tr.txt', ''), _write(tmp_path, 'te.txt', '0 1:1\n')
    cfg = data_config.file_data('libsvm', train, test)
  with pytest.raises(DataError, match=f'{train}: no examples with labels to train on'):
    load_splits(cfg)


def test_corel5k_ships_with_the_package():
  from wsabie_jax.data import corel5k_paths
  _, test_path, labels_path = corel5k_paths()
  ds = mulan.read_arff(test_path, labels_path)
  assert (ds.num_images + ds.skipped_empty, ds.num_labels, ds.num_features) == (500, 374, 499)


def test_synthetic_is_deterministic_with_planted_siblings():
  spec = synthetic.SyntheticSpec(num_labels=50, num_features=200, nnz=10, seed=3)
  a = synthetic.generate(spec, 300)
  b = synthetic.generate(spec, 300)
  np.testing.assert_array_equal(a.feat_idx, b.feat_idx)
  np.testing.assert_array_equal(a.label_idx, b.label_idx)
  c = synthetic.generate(spec, 300, split='test')
  assert not np.array_equal(a.label_idx[:50], c.label_idx[:50])
  assert a.label_parents.shape == (50, 1)
  assert np.bincount(a.label_parents[:, 0]).max() <= spec.group_size
  # Extra labels are siblings half of the time: far above chance co-occurrence.
  same_parent = [len(set(a.label_parents[a.labels(i), 0])) < len(a.labels(i))
                 for i in range(300) if len(a.labels(i)) > 1]
  assert np.mean(same_parent) > 0.3
  freq = np.sort(a.label_frequencies())[::-1]
  assert freq[0] > 5 * max(freq[25], 1)  # Zipf head


def test_split_normalize_and_padding():
  spec = synthetic.SyntheticSpec(num_labels=30, num_features=100, nnz=8)
  ds = dataset.normalize(synthetic.generate(spec, 100), 'l2')
  norms = np.sqrt(np.bincount(np.repeat(np.arange(100), np.diff(ds.feat_indptr)), ds.feat_val ** 2))
  np.testing.assert_allclose(norms, 1.0, rtol=1e-5)
  train, valid = dataset.split_validation(ds, 0.2, seed=0)
  assert (train.num_images, valid.num_images) == (80, 20)
  padded = batching.pad_images(valid)
  for i in range(valid.num_images):
    n = len(valid.features(i)[0])
    np.testing.assert_array_equal(padded.feat_idx_nxF[i, :n], valid.features(i)[0])
    assert np.all(padded.feat_val_nxF[i, n:] == 0)
    m = padded.num_pos_n[i]
    np.testing.assert_array_equal(padded.pos_nxP[i, :m], valid.labels(i))
    assert np.all(padded.pos_nxP[i, m:] == 30)


def test_pair_stream_covers_every_pair_each_epoch_and_is_deterministic():
  spec = synthetic.SyntheticSpec(num_labels=30, num_features=100, nnz=8)
  ds = synthetic.generate(spec, 50)
  stream = batching.PairStream(ds, batch_size=7, seed=1)
  n, G = stream.num_examples, stream.order.window
  steps = -(-2 * n // 7)
  # As drawn: each epoch a permutation; a call's ids at once (spanning epochs)
  # are position p's item of epoch p // n's permutation.
  drawn = stream.order.drawn(0, steps).reshape(-1)
  np.testing.assert_array_equal(np.sort(drawn[:n]), np.arange(n))
  np.testing.assert_array_equal(np.sort(drawn[n:2 * n]), np.arange(n))
  p = np.arange(2 * 7, (2 + 3 * steps) * 7)
  want = [np.random.default_rng([1, e]).permutation(n)[o] for e, o in zip(p // n, p % n)]
  np.testing.assert_array_equal(stream.order.drawn(2, 3 * steps), np.reshape(want, (3 * steps, 7)))
  # The batches (packs balanced): each window of G batches holds its drawn items.
  ids = stream.order.ids_block(0, 3 * G)
  for w in range(3):
    np.testing.assert_array_equal(np.sort(ids[w * G:(w + 1) * G], None),
                                  np.sort(stream.order.drawn(w * G, G), None))
  again = batching.PairStream(ds, batch_size=7, seed=1)
  np.testing.assert_array_equal(again.order.ids(steps - 1), stream.order.ids(steps - 1))
  block = again.ids_block(2, 3 * steps)  # a call's at once, as one at a time
  np.testing.assert_array_equal(block, [stream.order.ids(s) for s in range(2, 2 + 3 * steps)])
  batch = stream.batch(3)
  for b in range(7):
    assert batch.label_BxQ[b, 0] in batch.pos_BxP[b]
  assert stream.position(steps) == {'pairs_consumed': 7 * steps, 'epoch': 7 * steps // n,
                                    'offset_in_epoch': 7 * steps % n}


def test_zero_shot_hold_out_keeps_held_out_labels_out_of_training():
  from wsabie_jax.data import hold_out
  spec = synthetic.SyntheticSpec(num_labels=50, num_features=100, nnz=8)
  train, test = synthetic.generate(spec, 300), synthetic.generate(spec, 100, 'test')
  valid = train.subset(np.arange(50))
  tr, va, te = hold_out(train, valid, test, 0.2, seed=0)
  seen = tr.num_seen_labels
  assert seen == 40 and te.num_seen_labels == 40 and tr.num_labels == te.num_labels == 50
  assert tr.label_names == te.label_names and sorted(te.label_names) == sorted(test.label_names)
  assert tr.label_idx.max() < seen and va.label_idx.max() < seen
  assert tr.num_images + tr.skipped_empty == 300 and tr.skipped_empty > 0  # unlabelled ones go
  # Test keeps every image and label, renamed consistently.
  assert te.num_images == 100
  for i in range(100):
    assert sorted(te.label_names[j] for j in te.labels(i)) == sorted(
        test.label_names[j] for j in test.labels(i))
  assert np.all(np.diff(te.label_idx[te.label_indptr[3]:te.label_indptr[4]]) > 0)  # still sorted


@pytest.mark.parametrize('fraction', [-0.1, 1.0])
def test_a_hold_out_fraction_outside_0_to_1_is_refused(fraction):
  """1.0 would hold every label out: training would see none."""
  from wsabie_jax.data import dataset as dataset_lib
  with pytest.raises(ValueError, match=r'holdout fraction must be in \[0, 1\)'):
    dataset_lib.hold_out_labels(10, fraction, seed=0)
  assert dataset_lib.hold_out_labels(10, 0.0, seed=0)[1] == 10


def test_quoted_arff_names_lose_their_quotes():
  from wsabie_jax.data import mulan
  assert [mulan._unquote(n) for n in ("'a b'", '"x"', "''", "'", 'plain', "'it\\'s'")] == [
      'a b', 'x', '', "'", 'plain', "it's"]

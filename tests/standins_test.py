"""The panel's stand-ins (benchmarks/standins.py) have the shapes they stand in for."""
import numpy as np

from wsabie_jax.benchmarks import standins
from wsabie_jax.data import libsvm


def _shape(ds):
  nnz, per = np.diff(ds.feat_indptr), np.diff(ds.label_indptr)
  return nnz.mean(), nnz.max() / nnz.mean(), per.mean()


def test_text_has_a_long_tail_of_lengths_and_a_few_labels_each():
  train = standins.generate('text', scale=0.25)['train']
  mean_nnz, longest, labels = _shape(train)
  assert (train.num_labels, train.num_features) == (433, 11_974)
  assert 25 <= mean_nnz <= 45 and longest >= 30 and 3.0 <= labels <= 4.5, _shape(train)
  freq = np.sort(np.bincount(train.label_idx, minlength=433))[::-1]
  assert freq[0] > 20 * np.median(freq)  # Zipf: a head far above the median label


def test_many_labels_small_text_and_many_tags():
  mean_nnz, _, labels = _shape(standins.generate('many_labels', scale=0.25)['train'])
  assert 15 <= labels <= 25
  mean_nnz, _, labels = _shape(standins.generate('small_text')['train'])
  assert 50 <= mean_nnz <= 80 and 2 <= labels <= 3
  tags = standins.generate('many_tags')['train']
  assert tags.num_labels > tags.num_images and 4 <= _shape(tags)[2] <= 6


def test_folder_writes_libsvm_files_once(tmp_path, monkeypatch):
  spec, _, _ = standins.SPECS['many_labels']
  monkeypatch.setitem(standins.SPECS, 'tiny', (spec, 30, 10))
  folder = standins.folder('tiny', root=str(tmp_path))
  want = standins.generate('tiny')['train']
  got = libsvm.read_libsvm(folder / 'train.txt')
  np.testing.assert_array_equal(got.label_idx, want.label_idx)
  np.testing.assert_array_equal(got.feat_idx, want.feat_idx)
  np.testing.assert_allclose(got.feat_val, want.feat_val, rtol=1e-6)
  stamp = (folder / 'train.txt').stat().st_mtime_ns
  assert standins.folder('tiny', root=str(tmp_path)) == folder
  assert (folder / 'train.txt').stat().st_mtime_ns == stamp  # not rewritten

"""The peers' wiring (benchmarks/peers.py, launch/benchmark.py --suite=peers):
each installed library learns a set any classifier gets right, scored by the
same p@k; tf-idf as scikit-learn computes it; a missing library is a line."""
import numpy as np
import pytest

from wsabie_jax.benchmarks import peers
from wsabie_jax.data import dataset


def _easy(n: int, num_labels: int = 12, seed: int = 0):
  """Image i has label y_i (and y_i + 1 mod Y, half the time) and the words
  y_i, Y + y_i and a noise word: every label is named by its own words; and
  three images without words (tmc2007-500 and enron have some)."""
  rng = np.random.default_rng(seed)
  y = rng.integers(0, num_labels, n)
  feats, labels = [], []
  for label in y:
    noise = 2 * num_labels + rng.integers(0, 30)
    feats.append((np.array([label, num_labels + label, noise]),
                  rng.integers(1, 4, 3).astype(np.float32)))
    labels.append(sorted({int(label)} | ({int(label + 1) % num_labels} if rng.random() < 0.5
                                         else set())))
  feats += [(np.zeros(0, int), np.zeros(0, np.float32))] * 3  # (a few with no features at all)
  labels += [[0]] * 3
  return dataset.from_lists(feats, labels, 2 * num_labels + 30,
                            [f'l{j}' for j in range(num_labels)])


def test_precision_at_k_by_hand():
  ds = dataset.from_lists([(np.array([0]), np.array([1.0]))] * 2, [[1, 2], [0]], 1,
                          ['a', 'b', 'c'])
  top = np.array([[2, 0, 1], [1, -1, -1]])
  got = peers.precision_at(top, ds, ks=(1, 2, 3))
  assert got == pytest.approx({'p@1': 0.5, 'p@2': 0.25, 'p@3': (2 / 3 + 0) / 2})


def test_tfidf_is_scikit_learns_smooth_idf_with_l2_rows():
  sklearn_text = pytest.importorskip('sklearn.feature_extraction.text')
  train, test = _easy(80), _easy(30, seed=1)
  got_train, got_test = peers.tfidf(train, test)
  want = sklearn_text.TfidfTransformer().fit(peers.csr(train))
  for got, ds in ((got_train, train), (got_test, test)):
    np.testing.assert_allclose(peers.csr(got).toarray(), want.transform(peers.csr(ds)).toarray(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', list(peers.PEERS))
def test_each_installed_peer_learns_an_easy_set(name):
  """Each peer at least doubles the frequency baseline's p@1 on a set whose
  labels are named by their own words (so its labels are mapped back right)."""
  peer = peers.PEERS[name]
  if not peer.available():
    pytest.skip(f'{peer.module} is not installed')
  train, test = _easy(600), _easy(200, seed=1)
  rows = peers.run(train, test, threads=2, names=[name], log=lambda line: None)
  assert [r['weighting'] for r in rows] == (['raw', 'tfidf'] if peer.tfidf else ['raw'])
  freq = np.bincount(train.label_idx, minlength=train.num_labels).argmax()
  baseline = np.mean([freq in test.labels(i) for i in range(test.num_images)])
  for row in rows:
    assert row['p@1'] > max(2 * baseline, 0.5), row
    assert row['train_seconds'] > 0


def test_a_missing_library_is_skipped_with_a_line(monkeypatch):
  lines = []
  monkeypatch.setitem(peers.PEERS, 'nothing', peers.Peer('nothing', 'no_such_module_here',
                                                         lambda *a: None))
  assert peers.run(_easy(20), _easy(10), names=['nothing'], log=lines.append) == []
  assert lines == ['  nothing: skipped (no_such_module_here is not installed: '
                   'pip install -e ".[peers]")']


def test_a_row_is_the_mean_of_its_seeds_runs(monkeypatch):
  """With seeds > 1 each seed reaches the peer, and the row holds the mean of
  the runs' p@k with the standard error of the p@1 mean (a fake peer whose
  top label is right on images i < seed + 1 of the test split)."""
  test = _easy(4)
  truth = [int(test.labels(i)[0]) for i in range(test.num_images)]
  wrong = [next(y for y in range(test.num_labels) if y not in test.labels(i))
           for i in range(test.num_images)]
  seen = []

  def top_labels(train, test_, threads, scratch, seed):
    seen.append(seed)
    first = [truth[i] if i <= seed else wrong[i] for i in range(test_.num_images)]
    return lambda: np.array([[y] + [-1] * (peers.TOP - 1) for y in first])

  monkeypatch.setitem(peers.PEERS, 'fake', peers.Peer('fake', 'numpy', top_labels, tfidf=False))
  (row,) = peers.run(_easy(20), test, names=['fake'], seeds=3, log=lambda line: None)
  assert seen == [0, 1, 2]
  n = test.num_images  # (_easy's last three images have no words; every image has a label)
  p1 = np.array([1, 2, 3]) / n
  assert row['p@1'] == pytest.approx(p1.mean())
  assert row['p@1_sem'] == pytest.approx(p1.std(ddof=1) / np.sqrt(3))
  (single,) = peers.run(_easy(20), test, names=['fake'], log=lambda line: None)
  assert single['p@1'] == pytest.approx(1 / n) and 'p@1_sem' not in single


def test_fasttext_tries_a_lower_rate_where_its_rate_diverges(monkeypatch, tmp_path):
  """fastText's 'Encountered NaN' at the tutorial's lr 0.5: trained again at
  0.1, whose model predicts; another error, or NaN at every rate, is raised."""
  fasttext = pytest.importorskip('fasttext')
  rates = []

  class Model:
    def predict(self, lines, k):
      return [['__label__0'] * k for _ in lines], None

  def train_supervised(path, lr, **kw):
    rates.append(lr)
    if lr >= nan_from:
      raise RuntimeError('Encountered NaN.')
    return Model()

  monkeypatch.setattr(fasttext, 'train_supervised', train_supervised)
  nan_from = 0.5
  test = _easy(5)
  predict = peers._fasttext(_easy(20), test, 2, tmp_path, seed=0)
  assert rates == [0.5, 0.1]
  assert predict().shape == (test.num_images, peers.TOP)
  nan_from = 0.0
  with pytest.raises(RuntimeError, match='NaN'):
    peers._fasttext(_easy(20), _easy(5), 2, tmp_path, seed=0)

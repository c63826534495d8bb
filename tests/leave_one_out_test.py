"""Paper 003's protocol: leave one label out per image, image-id embeddings, and
rankings that leave out what training knows of the image."""
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import evaluation, metrics, model
from wsabie_jax.data import batching, dataset, synthetic


def _data(n=300):
  spec = synthetic.SyntheticSpec(num_labels=30, num_features=50, nnz=6, mean_labels=3.0)
  return synthetic.generate(spec, n)


def test_each_image_loses_one_label_to_the_held_out_set():
  ds = _data()
  train, held = dataset.leave_one_out(ds, seed=3)
  counts = np.diff(ds.label_indptr)
  rows = np.flatnonzero(counts >= 2)
  assert held.num_images == len(rows) > 100 and train.num_images == ds.num_images
  for j, i in enumerate(rows):
    whole, kept, out = set(ds.labels(i)), set(train.labels(i)), held.labels(j)
    assert len(out) == 1 and out[0] in whole and kept == whole - {out[0]}
    assert set(held.known(j)) == kept
    np.testing.assert_array_equal(held.features(j)[0], ds.features(i)[0])
  for i in np.flatnonzero(counts < 2):  # nothing to hold out: the image trains whole
    np.testing.assert_array_equal(train.labels(i), ds.labels(i))
  # Uniform over an image's labels: each position held out about equally often.
  positions = [list(ds.labels(i)).index(held.labels(j)[0]) for j, i in enumerate(rows)
               if counts[i] == 3]
  assert np.bincount(positions, minlength=3).min() > 0.2 * len(positions)
  sub = held.subset(np.array([4, 1]))
  np.testing.assert_array_equal(sub.known(0), held.known(4))


def test_image_id_features_give_one_row_per_image():
  ds = dataset.image_id_features(_data(40))
  assert ds.num_features == 40
  for i in (0, 17, 39):
    idx, val = ds.features(i)
    assert list(idx) == [i] and list(val) == [1.0]


def test_known_labels_leave_the_ranking():
  """Known labels score −∞: a positive's rank counts only unknown labels above it,
  the top-k never holds a known label, and AUC's negatives exclude them."""
  rng = np.random.default_rng(0)
  B, Y, D = 5, 12, 4
  image, W = rng.normal(size=(B, D)), rng.normal(size=(Y, D))
  s = image @ W.T
  pos = np.argsort(-s, 1)[:, 4:5].astype(np.int32)       # the 5th best label is the positive
  known = np.argsort(-s, 1)[:, [0, 2]].astype(np.int32)  # two labels above it are known
  known[0, 1] = Y                                         # padding
  ranks, top, _ = metrics.rank_and_top_k(jnp.asarray(image, jnp.float32), jnp.asarray(W, jnp.float32),
                                         jnp.asarray(pos), k=3, score_kind='dot', chunk=5,
                                         known_BxE=jnp.asarray(known))
  ranks, top = np.asarray(ranks), np.asarray(top)
  np.testing.assert_array_equal(ranks[:, 0], [3] + [2] * (B - 1))
  for b in range(B):
    assert not set(top[b]) & set(known[b][known[b] < Y])
  num_known = (known < Y).sum(1)
  auc = metrics.per_image_metrics(ranks, top, Y, (1,), num_known_B=num_known)['auc']
  np.testing.assert_allclose(auc, 1 - ranks[:, 0] / (Y - 1 - num_known))


def test_load_splits_under_the_protocol():
  from wsabie_jax.data import settings as data_config
  from wsabie_jax import data as data_lib
  cfg = data_config.synthetic_data(small=True)
  cfg.update(num_train=400, num_test=100, protocol='leave_one_out', features='image_id')
  train, valid, test = data_lib.load_splits(cfg)
  assert train.num_images == 500 and train.num_features == 500
  assert abs(valid.num_images - test.num_images) <= 1 and valid.num_images > 50
  padded = batching.pad_images(test)
  assert padded.known_nxE is not None and padded.known_nxE.shape[0] == test.num_images
  params = model.init_params(jnp.zeros(2, jnp.uint32), train.num_features, train.num_labels, 8, 1.0)
  got = evaluation.evaluate_params(params, padded, ks=(1,))
  assert 0 <= got['p@1'] <= 1 and got['num_images'] == test.num_images
  for bad, match in ((dict(features='image_id'), 'needs data.protocol'),
                     (dict(protocol='loo'), 'protocol')):
    cfg = data_config.synthetic_data(small=True)
    cfg.update(num_train=40, num_test=10, **bad)
    with pytest.raises(ValueError, match=match):
      data_lib.load_splits(cfg)


def test_paper_003_protocol_config():
  from wsabie_jax.api import configs
  c = configs.load('samplers:auc,corel5k,paper,small')
  assert (c.data.protocol, c.data.features) == ('leave_one_out', 'image_id')
  assert (c.model.dim, c.model.init_std, c.optim.kind, c.optim.learning_rate, c.optim.l2) == (
      100, 0.01, 'sgd', 0.01, 0.01)
  assert c.loss.pairwise == 'logistic' and c.model.max_norm == float('inf')
  assert c.train.patience > 10**5  # every row takes the whole budget
  assert configs.load('samplers:auc,synthetic,paper,small').train.patience > 10**5
  assert configs.load('samplers:vse_hinge,corel5k,paper,small').loss.pairwise == 'hinge'
  assert configs.load('samplers:auc,corel5k').data.protocol == 'random'

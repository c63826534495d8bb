"""Paper 000 §6.3's baselines and Table 7's ensembles, against references."""
import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.baselines import linear as baselines
from wsabie_jax.baselines import ensemble
from wsabie_jax.core import evaluation
from wsabie_jax.baselines import knn
from wsabie_jax.core import metrics
from wsabie_jax.data import batching, dataset, synthetic


def _data(n=600, Y=30, d=200, seed=0):
  spec = synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=15, signal=0.8, seed=seed)
  world = synthetic.make_world(spec)
  return (dataset.normalize(synthetic.generate(spec, n, world=world), 'l2'),
          dataset.normalize(synthetic.generate(spec, 200, 'test', world=world), 'l2'))


def test_scores_path_ranks_like_the_embedding_path():
  rng = np.random.default_rng(0)
  image, W = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(9, 4)).astype(np.float32)
  pos = jnp.array([[1, 3, 9], [0, 9, 9], [8, 2, 9], [4, 9, 9], [5, 6, 7]])
  a = metrics.rank_and_top_k(jnp.asarray(image), jnp.asarray(W), pos, k=4, score_kind='dot')
  b = metrics.rank_and_top_k_from_scores(jnp.asarray(image @ W.T), pos, k=4)
  np.testing.assert_array_equal(a[0], b[0])
  np.testing.assert_array_equal(a[1], b[1])


def test_linear_baselines_separate_their_training_data():
  train, _ = _data(n=300)
  padded = batching.pad_images(train)
  for kind in ('ovr', 'pamir'):
    W = baselines.train_linear(train, kind, C=10.0, epochs=20)
    m = evaluation.evaluate_ranking(baselines.linear_scores(W), None, padded, num_labels=30, ks=(1,))
    assert m['p@1'] > 0.9, (kind, m['p@1'])
  W = np.asarray(baselines.train_linear(train, 'ovr', C=10.0, epochs=20))
  X = np.zeros((train.num_images, train.num_features))
  for i in range(train.num_images):
    X[i, train.features(i)[0]] = train.features(i)[1]
  margins = X @ W
  positive = np.zeros_like(margins, bool)
  for i in range(train.num_images):
    positive[i, train.labels(i)] = True
  assert (margins[positive] > 0).mean() > 0.95 and (margins[~positive] < 0).mean() > 0.99


def test_an_averaged_one_vs_rest_is_the_mean_of_its_later_epochs_ends():
  """average=True: the mean of W after epochs 2, 3 and 4 of 4 (the second
  half's ends), each epoch's order the same as the unaveraged runs'."""
  train, _ = _data(n=60)
  ends = [np.asarray(baselines.train_linear(train, 'ovr', C=0.1, epochs=k)) for k in (2, 3, 4)]
  got = np.asarray(baselines.train_linear(train, 'ovr', C=0.1, epochs=4, average=True))
  np.testing.assert_allclose(got, np.mean(ends, 0), rtol=1e-5, atol=1e-6)


def _long_tailed(n=700, Y=20, d=3000):
  """Examples of 1 to hundreds of non-zeros (a log-normal length, as documents have)."""
  spec = synthetic.SyntheticSpec(num_labels=Y, num_features=d, nnz=30, nnz_spread=1.5, seed=4)
  return dataset.normalize(synthetic.generate(spec, n), 'l2')


def test_one_vs_rest_blocks_cover_an_epoch_once_and_cap_their_padding():
  """Every example in one block of an epoch, its width the power of two at
  or above the block's longest, and a wide block holds fewer examples
  (rows_at): debtags' few long packages no longer pad a block of short ones."""
  train = _long_tailed(n=3000)
  lengths = np.diff(train.feat_indptr)
  assert lengths.max() > 512  # (blocks of several widths, the widest with fewer rows)
  blocks = baselines._blocks(np.random.default_rng(0).permutation(train.num_images), lengths,
                             np.random.default_rng(1))
  np.testing.assert_array_equal(np.sort(np.concatenate([b for b, _ in blocks])),
                                np.arange(train.num_images))
  for rows, width in blocks:
    assert width == baselines.width_of(lengths[rows].max())
    assert len(rows) <= baselines.rows_at(width)
  padded = sum(baselines.rows_at(width) * width for _, width in blocks)
  # Against blocks of BLOCK examples whatever their width (the sorted order cut
  # every BLOCK): 2.1 against 5.8 slots a non-zero here.
  flat = np.sort(lengths)
  uncapped = sum(baselines.BLOCK * baselines.width_of(flat[i:i + baselines.BLOCK].max())
                 for i in range(0, len(flat), baselines.BLOCK))
  assert padded < 0.5 * uncapped, (padded / lengths.sum(), uncapped / lengths.sum())
  widest = max(w for _, w in blocks)
  assert widest >= 512 and baselines.rows_at(widest) < baselines.BLOCK


def _greedy_blocks(order, lengths, rng):
  """_blocks one example at a time: a block takes the next (by length within
  its window) while it holds fewer than that one's rows_at."""
  blocks = []
  for window in np.split(order, range(baselines.WINDOW, len(order), baselines.WINDOW)):
    window = window[np.argsort(lengths[window], kind='stable')]
    width = baselines.width_of(lengths[window])
    start = 0
    while start < len(window):
      end = start + 1
      while end < len(window) and end - start < baselines.rows_at(width[end]):
        end += 1
      blocks.append((window[start:end], int(width[end - 1])))
      start = end
  return [blocks[i] for i in rng.permutation(len(blocks))]


def test_one_vs_rest_blocks_are_the_greedy_cut():
  lengths = np.diff(_long_tailed(n=9000).feat_indptr)  # (more than one window)
  order = np.random.default_rng(0).permutation(len(lengths))
  got = baselines._blocks(order, lengths, np.random.default_rng(1))
  want = _greedy_blocks(order, lengths, np.random.default_rng(1))
  assert [w for _, w in got] == [w for _, w in want] and len(set(w for _, w in got)) > 2
  for (a, _), (b, _) in zip(got, want):
    np.testing.assert_array_equal(a, b)


def test_one_vs_rest_is_pa1_visiting_the_blocks_order():
  """One epoch of train_linear('ovr') against PA-I in numpy (Crammer et al.
  2006: ℓ_i = |1 − y_i w_i·x|₊, τ_i = min(C, ℓ_i/‖x‖²), w_i += τ_i y_i x for
  every label i), one example at a time in the order its blocks visit them."""
  train = _long_tailed(n=300)
  lengths = np.diff(train.feat_indptr)
  rng = np.random.default_rng(5)
  order = np.concatenate([b for b, _ in baselines._blocks(rng.permutation(train.num_images),
                                                         lengths, rng)])
  W = np.zeros((train.num_features, train.num_labels))
  for i in order:
    idx, val = train.features(i)
    y = -np.ones(train.num_labels)
    y[train.labels(i)] = 1.0
    tau = np.minimum(0.5, np.maximum(0.0, 1 - y * (val @ W[idx])) / (val @ val))
    np.add.at(W, idx, val[:, None] * (tau * y)[None])
  got = np.asarray(baselines.train_linear(train, 'ovr', C=0.5, epochs=1, seed=5))
  np.testing.assert_allclose(got, W, atol=1e-5)


def test_exact_knn_matches_brute_force():
  train, test = _data()
  t, q = batching.pad_images(train), batching.pad_images(test)
  s, i = knn.neighbours(jnp.asarray(q.feat_idx_nxF[:8]), jnp.asarray(q.feat_val_nxF[:8]),
                        jnp.asarray(t.feat_idx_nxF), jnp.asarray(t.feat_val_nxF), k=5,
                        num_features=200, chunk=128)
  dense = lambda p: np.stack([np.bincount(r, v, 200) for r, v in zip(p.feat_idx_nxF, p.feat_val_nxF)])
  sims = dense(q)[:8] @ dense(t).T
  s, i = np.asarray(s), np.asarray(i)
  np.testing.assert_allclose(s, -np.sort(-sims, 1)[:, :5], rtol=1e-5)
  # The rows returned hold those similarities (near-ties may pick either row).
  np.testing.assert_allclose(np.take_along_axis(sims, i, 1), s, rtol=1e-5)
  assert all(len(set(row)) == 5 for row in i)
  scores = np.asarray(knn.vote(jnp.asarray(s), jnp.asarray(i), jnp.asarray(t.pos_nxP), 30))
  want = np.zeros((8, 30))
  for b in range(8):
    for j in i[b]:
      want[b, train.labels(j)] += sims[b, j]
  np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-6)


def test_random_projection_tree_is_balanced_and_exact_at_depth_zero():
  train, test = _data()
  t, q = batching.pad_images(train), batching.pad_images(test)
  tree = knn.RandomProjectionTree(t, 200, depth=3)
  sizes = [len(leaf) for leaf in tree.leaves]
  assert sum(sizes) == 600 and max(sizes) - min(sizes) <= 8 and len(sizes) == 8
  assert sorted(np.concatenate(tree.leaves)) == list(range(600))
  leaf = tree.leaf_of(t.feat_idx_nxF, t.feat_val_nxF)  # training points find their own leaf
  for l, rows in enumerate(tree.leaves):
    assert (leaf[rows] == l).all()
  flat = knn.RandomProjectionTree(t, 200, depth=0).scores(30, k=5)
  exact = knn.exact_scores(t, 200, 30, k=5)
  np.testing.assert_allclose(np.asarray(flat(q.feat_idx_nxF[:16], q.feat_val_nxF[:16])),
                             np.asarray(exact(q.feat_idx_nxF[:16], q.feat_val_nxF[:16])), rtol=1e-5)


def test_ensemble_weights_are_fit_on_validation():
  train, test = _data()
  padded = batching.pad_images(test)
  good = baselines.linear_scores(baselines.train_linear(train, 'pamir', C=1.0, epochs=3))
  noise = lambda idx, val: jax.random.normal(jax.random.PRNGKey(idx.shape[0]), (idx.shape[0], 30))
  weights, best = ensemble.fit_weights([noise, good], padded, 30, grid=(0.0, 1.0, 100.0))
  assert weights == (1.0, 100.0)  # the informative member dominates
  alone = evaluation.evaluate_ranking(good, None, padded, num_labels=30)['p@1']
  assert best >= alone - 0.02

"""Every metric against a brute-force numpy reference that sorts all labels."""
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import evaluation
from wsabie_jax.core import metrics
from wsabie_jax.data import batching, dataset

Y, D, B, P = 23, 3, 17, 4


def _problem(seed=0):
  """Integer-valued embeddings so that many scores tie exactly; duplicate label rows."""
  rng = np.random.default_rng(seed)
  W = rng.integers(-2, 3, (Y, D)).astype(np.float32)
  W[5] = W[11]  # exact duplicates tie for every image
  W[19] = W[2]
  image = rng.integers(-2, 3, (B, D)).astype(np.float32)
  pos = np.full((B, P), -1, np.int32)
  for b in range(B):
    n = rng.integers(1, P + 1)
    pos[b, :n] = np.sort(rng.choice(Y, n, replace=False))
  pos[0, :2] = [5, 11]  # positives tied with each other
  parents = rng.integers(-1, 6, (Y, 2)).astype(np.int32)
  parents[[5, 11, 17]] = -1  # labels with no is-a parent: a sibling of themselves only
  return W, image, pos, parents


def _reference(W, image, pos, parents, ks):
  S = np.eye(Y, dtype=bool)
  for i in range(Y):
    for j in range(Y):
      S[i, j] |= bool(set(parents[i][parents[i] >= 0]) & set(parents[j][parents[j] >= 0]))
  out = {m: [] for m in [f'p@{k}' for k in ks] + [f'r@{k}' for k in ks] + [f'psib@{k}' for k in ks]
         + ['ap', 'auc', 'mean_rank']}
  tops = []
  for b in range(B):
    s = image[b] @ W.T
    ranked = np.lexsort((np.arange(Y), -s))  # score descending, then lower id first
    tops.append(ranked)
    P_b = set(pos[b][pos[b] >= 0].tolist())
    for k in ks:
      hits = len(P_b & set(ranked[:k].tolist()))
      out[f'p@{k}'].append(hits / k)
      out[f'r@{k}'].append(hits / len(P_b))
      out[f'psib@{k}'].append(sum(max(S[ranked[i], y] for y in P_b) for i in range(k)) / k)
    hits, precs = 0, []
    for position, label in enumerate(ranked, 1):
      if label in P_b:
        hits += 1
        precs.append(hits / position)
    out['ap'].append(np.mean(precs))
    place = {label: i for i, label in enumerate(ranked)}
    negs = [n for n in range(Y) if n not in P_b]
    out['auc'].append(np.mean([place[p] < place[n] for p in P_b for n in negs]))
    out['mean_rank'].append(np.mean([place[p] + 1 for p in P_b]))
  return {k: np.array(v) for k, v in out.items()}, np.array(tops)


@pytest.mark.parametrize('chunk', [7, 23, 64])
def test_rank_and_top_k_and_per_image_metrics_match_brute_force(chunk):
  W, image, pos, parents = _problem()
  ks = (1, 3, 5)
  want, tops = _reference(W, image, pos, parents, ks)
  ranks, top, _ = metrics.rank_and_top_k(jnp.asarray(image), jnp.asarray(W), jnp.asarray(pos),
                                         k=5, score_kind='dot', chunk=chunk)
  np.testing.assert_array_equal(np.asarray(top), tops[:, :5])
  got = metrics.per_image_metrics(np.asarray(ranks), np.asarray(top), Y, ks, parents, pos)
  for name, values in want.items():
    np.testing.assert_allclose(got[name], values, rtol=1e-6, err_msg=name)
  # The fixture reaches the cases it is for: tied scores, parentless labels in
  # the top k beside other positives, and parentless positives.
  scores = image @ W.T
  assert any(len(set(row)) < Y for row in scores)
  parentless = np.flatnonzero((parents < 0).all(1))
  assert np.isin(tops[:, :5], parentless).any() and np.isin(pos, parentless).any()


def test_scored_labels_rank_by_the_same_tie_rule():
  """rank_and_top_k_from_scores (k-NN votes, linear baselines, ensembles: many
  labels tie, every unvoted one at 0) against the brute force's order —
  score descending, then the lower label id — in both its ranks and its top k,
  and the metrics read from them."""
  W, image, pos, parents = _problem()
  scores = image @ W.T
  scores[:, 15:] = 0.0  # unvoted labels: a block of exact ties at 0
  want, tops = _reference(np.eye(Y, dtype=np.float32), scores, pos, parents, (1, 3, 5))
  ranks, top, _ = metrics.rank_and_top_k_from_scores(jnp.asarray(scores), jnp.asarray(pos), k=5)
  np.testing.assert_array_equal(np.asarray(top), tops[:, :5])
  got = metrics.per_image_metrics(np.asarray(ranks), np.asarray(top), Y, (1, 3, 5), parents, pos)
  for name, values in want.items():
    np.testing.assert_allclose(got[name], values, rtol=1e-6, err_msg=name)
  assert (np.sort(scores, 1)[:, 1:] == np.sort(scores, 1)[:, :-1]).any(1).all()  # ties everywhere


@pytest.mark.parametrize('dense', [None, False, True])
@pytest.mark.parametrize('width', [1, 4, 40])  # d/F 400 and 100: gathered by the rule; 10: dense
def test_rows_times_a_table_is_x_times_t_either_way(width, dense):
  """evaluation.rows_times(T, rows) = X·T for padded sparse rows (padding:
  feature 0, value 0), T's rows gathered or the rows written out dense, as
  the rule (DENSE_AT) or the caller chooses; the linear baselines score so."""
  from wsabie_jax.baselines import linear
  rng = np.random.default_rng(width)
  d, K, B = 400, 7, 5
  T = rng.normal(size=(d, K)).astype(np.float32)
  idx = np.stack([rng.choice(np.arange(1, d), width, replace=False) for _ in range(B)])
  val = rng.random((B, width)).astype(np.float32)
  idx[1, width // 2:], val[1, width // 2:] = 0, 0.0  # a shorter row, padded
  X = np.zeros((B, d), np.float32)
  np.put_along_axis(X, idx, val, 1)
  X[:, 0] = 0.0  # (padding's value)
  assert evaluation.written_out_dense(d, width) == (width == 40)
  i, v = jnp.asarray(idx, jnp.int32), jnp.asarray(val)
  got = evaluation.rows_times(jnp.asarray(T), i, v, dense)
  np.testing.assert_allclose(np.asarray(got), X @ T, rtol=1e-5, atol=1e-5)
  if dense is None:
    np.testing.assert_allclose(np.asarray(linear.linear_scores(T)(i, v)), X @ T, rtol=1e-5,
                               atol=1e-5)


def test_the_eval_suite_times_both_forms_of_rows_times():
  """launch/benchmark.py --suite=eval's second table (small): both columns
  timed at every shape, and the rule's side named."""
  from wsabie_jax.benchmarks import suites
  rows = suites.rows_times_speed(small=True)
  assert [(r['d'], r['F'], r['rule']) for r in rows] == [(512, 4, 'gathered'), (64, 32, 'dense')]
  assert all(r['gathered_ms'] > 0 and r['dense_ms'] > 0 for r in rows)


def test_sibling_relation_of_parentless_labels():
  """S_ab (paper 000 §4): a label with no is-a parent is a sibling of itself
  only; −1 pads are not a shared parent."""
  parents = np.array([[-1, -1], [-1, -1], [7, -1], [-1, 7], [8, 7]], np.int32)
  a = np.array([0, 0, 1, 2, 2, 3, 0])
  b = np.array([0, 1, 0, 3, 4, 4, 2])
  np.testing.assert_array_equal(metrics.is_sibling(a, b, parents),
                                [True, False, False, True, True, True, False])
  S = metrics.sibling_matrix(parents).toarray()
  np.testing.assert_array_equal(S[a, b], metrics.is_sibling(a, b, parents))
  got = metrics.sibling_precision(np.array([[1, 2]]), np.array([[0, -1]]), parents, (1, 2))
  assert got['psib@1'][0] == 0 and got['psib@2'][0] == 0


def test_class_counts_precision_recall_f1():
  rng = np.random.default_rng(1)
  top = np.stack([rng.choice(Y, 3, replace=False) for _ in range(B)])
  pos = np.full((B, P), -1, np.int32)
  for b in range(B):
    n = rng.integers(1, P + 1)
    pos[b, :n] = rng.choice(Y, n, replace=False)
  counts = metrics.ClassCounts(Y)
  counts.add(top[:9], pos[:9])
  counts.add(top[9:], pos[9:])
  got = counts.summary(3)
  tp, pred, actual = np.zeros(Y), np.zeros(Y), np.zeros(Y)
  for b in range(B):
    P_b = set(pos[b][pos[b] >= 0].tolist())
    for c in range(Y):
      pred[c] += c in top[b]
      actual[c] += c in P_b
      tp[c] += (c in top[b]) and (c in P_b)
  present = actual > 0
  p_c = np.where(pred > 0, tp / np.maximum(pred, 1), 0)
  r_c = tp / np.maximum(actual, 1)
  f_c = np.where(p_c + r_c > 0, 2 * p_c * r_c / np.maximum(p_c + r_c, 1e-12), 0)
  assert got['class_p@3'] == pytest.approx(p_c[present].mean())
  assert got['class_r@3'] == pytest.approx(r_c[present].mean())
  assert got['class_f1@3'] == pytest.approx(f_c[present].mean())
  P_o, R_o = tp.sum() / pred.sum(), tp.sum() / actual.sum()
  assert got['overall_p@3'] == pytest.approx(P_o)
  assert got['overall_f1@3'] == pytest.approx(2 * P_o * R_o / (P_o + R_o))


def test_evaluate_ranking_averages_over_real_images_only():
  """Batches are padded to a fixed size; the padding must not count."""
  W, image, pos, parents = _problem(2)
  feats = [(np.array([b]), np.array([1.0])) for b in range(B)]
  labels = [p[p >= 0] for p in pos]
  ds = dataset.from_lists(feats, labels, B, [str(i) for i in range(Y)])
  padded = batching.pad_images(ds)
  V = jnp.asarray(image)  # image b is feature b with value 1: V x = image[b]
  got = evaluation.evaluate_ranking(lambda i, v: evaluation.embed(V, i, v), jnp.asarray(W),
                                    padded, ks=(1, 3), batch_size=5, chunk=8, f1_k=3)
  want, _ = _reference(W, image, pos, parents, (1, 3))
  assert got['num_images'] == B
  for name in ('p@1', 'p@3', 'r@3', 'auc', 'mean_rank'):
    assert got[name] == pytest.approx(want[name].mean()), name
  assert got['map'] == pytest.approx(want['ap'].mean())


def test_frequency_baseline_predicts_most_frequent_labels():
  feats = [(np.array([0]), np.array([1.0]))] * 4
  labels = [np.array([2]), np.array([2, 0]), np.array([1]), np.array([2])]
  ds = dataset.from_lists(feats, labels, 1, ['a', 'b', 'c'])
  got = evaluation.evaluate_frequency_baseline(ds.label_frequencies(), batching.pad_images(ds),
                                               ks=(1,), f1_k=1)
  assert got['p@1'] == pytest.approx(3 / 4)  # label 2 is predicted first for everyone


@pytest.mark.parametrize('with_known', [False, True])
def test_frequency_baseline_ranks_as_scoring_the_counts_would(with_known):
  """The numpy baseline equals evaluate_ranking scoring every image by the
  label counts (its route before): ties (by id), padded positives, parents,
  leave-one-out known labels skipped."""
  rng = np.random.default_rng(3)
  counts = rng.integers(0, 4, Y)  # few values: many ties
  _, _, pos, parents = _problem(4)
  pos = np.where(pos >= 0, pos, Y).astype(np.int32)
  known = None
  if with_known:
    known = np.full((B, 3), Y, np.int32)
    for b in range(B):
      others = np.setdiff1d(np.arange(Y), pos[b])
      n = rng.integers(0, 4)
      known[b, :n] = rng.choice(others, n, replace=False)
  padded = batching.PaddedImages(np.zeros((B, 1), np.int32), np.ones((B, 1), np.float32), pos,
                                 (pos < Y).sum(1).astype(np.int32), known)
  kw = dict(ks=(1, 3, 5), batch_size=5, label_parents=parents, f1_k=3)
  got = evaluation.evaluate_frequency_baseline(counts, padded, **kw)
  W = jnp.asarray(counts, jnp.float32)[:, None]
  want = evaluation.evaluate_ranking(lambda i, v: jnp.ones((i.shape[0], 1)), W, padded,
                                     score='dot', chunk=7, **kw)
  assert got.keys() == want.keys()
  for name in want:
    assert got[name] == pytest.approx(want[name]), name


def test_a_positive_never_ranks_below_itself():
  """Regression: the two passes' matmuls may round a score differently (XLA:CPU
  did, at B = 5, Y = 12, chunk 4), and the positive counted itself as above
  it — every rank here came out one too high before the fix."""
  rng = np.random.default_rng(0)
  image = rng.normal(size=(5, 4)).astype(np.float32)
  W = rng.normal(size=(12, 4)).astype(np.float32)
  s = image @ W.T
  pos = np.argsort(-s, 1)[:, 4:5].astype(np.int32)
  for chunk in (4, 5, 12):
    ranks, _, _ = metrics.rank_and_top_k(jnp.asarray(image), jnp.asarray(W), jnp.asarray(pos),
                                         k=3, score_kind='dot', chunk=chunk)
    np.testing.assert_array_equal(np.asarray(ranks)[:, 0], [4] * 5)


def test_a_run_ends_in_one_summary_line():
  from wsabie_jax.api import run
  metrics = {'p@1': 0.41234, 'p@5': 0.2588, 'map': 0.34792, 'freq_p@1': 0.232, 'freq_p@5': 0.176,
             'freq_map': 0.216, 'steps': 16000, 'train_seconds': 40.2,
             'train_examples_per_sec': 21912.0, 'auc': 0.9}
  assert run.summary_line(metrics) == ('test p@1 0.412  p@5 0.259  MAP 0.348   (frequency: '
                                       '0.232 0.176 0.216)   16,000 steps, 40 s, 21.9k pairs/s')
  assert run.summary_line({'annot_p@1': 0.5, 'annot_map': 0.25}, 'valid') == (
      'valid annotation p@1 0.500  annotation MAP 0.250')


def test_files_keep_seven_significant_digits():
  from wsabie_jax.core import metrics
  got = metrics.for_file({'p@5': 0.12300000000000003, 'auc': 0.9876543219, 'steps': 16000,
                          'stopped': 'completed'})
  assert got == {'p@5': 0.123, 'auc': 0.9876543, 'steps': 16000, 'stopped': 'completed'}


def test_scored_ranks_over_many_labels_count_every_label_above():
  """rank_and_top_k_from_scores and rank_and_top_k with Y 77 (the CPU counts
  in 32-label slices, the last padded): each positive's rank is the count of
  labels scoring above it or tying with a lower id, by brute force; padding −1."""
  rng = np.random.default_rng(3)
  scores = rng.integers(-3, 4, (9, 77)).astype(np.float32)  # many ties
  pos = np.full((9, 5), 77, np.int32)
  for b in range(9):
    pos[b, :b % 5 + 1] = np.sort(rng.choice(77, b % 5 + 1, replace=False))
  want = np.full(pos.shape, -1)
  for b, p in zip(*np.nonzero(pos < 77)):
    y = pos[b, p]
    want[b, p] = sum(scores[b, o] > scores[b, y] or (scores[b, o] == scores[b, y] and o < y)
                     for o in range(77))
  ranks, _, _ = metrics.rank_and_top_k_from_scores(jnp.asarray(scores), jnp.asarray(pos), k=5)
  np.testing.assert_array_equal(ranks, want)
  # The same scores as embeddings (W the identity), in label chunks of 50 (the last padded).
  ranks, _, _ = metrics.rank_and_top_k(jnp.asarray(scores), jnp.eye(77), jnp.asarray(pos), k=5,
                                       score_kind='dot', chunk=50)
  np.testing.assert_array_equal(ranks, want)

"""Paper 002's quadruplet model: exact K² ranking, triplets, and the step's sparse updates."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.parts import step as parts
from wsabie_jax.parts import evaluation as parts_eval


def test_pair_ranks_match_brute_force_over_k_squared():
  rng = np.random.default_rng(0)
  B, K, D = 6, 11, 4
  a, b = rng.normal(size=(B, K)), rng.normal(size=(B, K))
  W = rng.normal(size=(K, D))
  lo, lp = rng.integers(0, K, B), rng.integers(0, K, B)
  R = np.zeros((K, K))
  R[lo[:3], lp[:3]] = 100.0  # the offset variant: some true pairs are known relations
  for beta, offset in ((0.1, np.zeros((K, K))), (0.0, np.zeros((K, K))), (0.0, R)):
    got = np.asarray(parts_eval.pair_ranks(*map(jnp.asarray, (a, b, W, lo, lp)), beta,
                                           jnp.asarray(offset, jnp.float32), chunk=4))
    f = lambda q, i, j: a[q, i] + b[q, j] + beta * W[i] @ W[j] + offset[i, j]
    want = [sum(f(q, i, j) > f(q, lo[q], lp[q]) for i, j in itertools.product(range(K), repeat=2))
            for q in range(B)]
    np.testing.assert_array_equal(got, want)
    ro, rp = parts_eval.triplet_ranks(*map(jnp.asarray, (a, b, W, lo, lp)), beta,
                                      jnp.asarray(offset, jnp.float32))
    np.testing.assert_array_equal(ro, [sum(f(q, i, lp[q]) > f(q, lo[q], lp[q]) for i in range(K))
                                       for q in range(B)])
    np.testing.assert_array_equal(rp, [sum(f(q, lo[q], j) > f(q, lo[q], lp[q]) for j in range(K))
                                       for q in range(B)])


def test_rank_metrics():
  m = parts_eval.rank_metrics(np.array([0, 3, 12]), 'x_')
  assert m['x_p@1'] == 1 / 3 and m['x_p@10'] == 2 / 30
  assert abs(m['x_map'] - (1 + 1 / 4 + 1 / 13) / 3) < 1e-12


def _batch(B=16, F=3, d=30, K=12, seed=0):
  rng = np.random.default_rng(seed)
  return {'obj_idx_BxF': rng.integers(0, d, (B, F)).astype(np.int32),
          'obj_val_BxF': np.ones((B, F), np.float32),
          'part_idx_BxF': rng.integers(0, d, (B, F)).astype(np.int32),
          'part_val_BxF': np.ones((B, F), np.float32),
          'obj_label_B': rng.integers(0, K, B).astype(np.int32),
          'part_label_B': rng.integers(0, K, B).astype(np.int32),
          'weight_B': np.ones(B, np.float32)}


def test_step_updates_only_used_rows_and_keeps_the_ball():
  for shared in (True, False):
    cfg = parts.PartsConfig(12, model=parts.PartsModel(dim=8, shared=shared),
                            loss=parts.PartsLoss(num_draws=5),
                            optim=parts.PartsOptim('sgd', learning_rate_V=0.5, learning_rate_W=0.5))
    state = parts.init_state(jax.random.PRNGKey(0), cfg, 30)
    before = jax.tree.map(np.asarray, state.params)
    batch = _batch()
    new, stats = parts.make_train_step(cfg)(state, jax.device_put(batch))
    used_features = set(batch['obj_idx_BxF'].ravel()) | set(batch['part_idx_BxF'].ravel())
    moved_V = set(np.flatnonzero(np.any(np.asarray(new.params.V_dxD) != before.V_dxD, 1)))
    assert moved_V and moved_V <= used_features
    assert float(stats['loss']) > 0 and int(stats['violator_found']) > 0
    for table in (new.params.V_dxD, new.params.W_KxD, new.params.U_KxD):
      assert np.all(np.linalg.norm(np.asarray(table), axis=1) <= 1 + 1e-5)
    if not shared:
      assert np.any(np.asarray(new.params.U_KxD) != before.U_KxD)


def test_training_ranks_true_pairs_higher():
  """A planted world: labels' images share features; training lifts the true pairs."""
  rng = np.random.default_rng(1)
  K, d, B = 12, 60, 64
  proto = rng.integers(0, d, (K, 4))
  relations = np.array([[i, (i + 1) % K] for i in range(K)])

  def batch(seed):
    r = np.random.default_rng(seed).integers(0, K, B)
    lo, lp = relations[r, 0], relations[r, 1]
    return {'obj_idx_BxF': proto[lo].astype(np.int32), 'obj_val_BxF': np.full((B, 4), 0.5, np.float32),
            'part_idx_BxF': proto[lp].astype(np.int32), 'part_val_BxF': np.full((B, 4), 0.5, np.float32),
            'obj_label_B': lo.astype(np.int32), 'part_label_B': lp.astype(np.int32),
            'weight_B': np.ones(B, np.float32)}

  cfg = parts.PartsConfig(K, model=parts.PartsModel(dim=16), loss=parts.PartsLoss(num_draws=5),
                          optim=parts.PartsOptim(learning_rate_V=0.2, learning_rate_W=0.2))
  state = parts.init_state(jax.random.PRNGKey(0), cfg, d)
  step = parts.make_train_step(cfg)
  test = batch(999)
  evaluate = lambda s: parts_eval.evaluate(s.params.V_dxD, s.params.W_KxD, s.params.W_KxD, test,
                                           cfg.model.alpha, relations)
  first = evaluate(state)
  for i in range(300):
    state, _ = step(state, jax.device_put(batch(i)))
  last = evaluate(state)
  assert last['iw_pair_map'] > 0.5 > first['iw_pair_map']
  assert last['annot_p@1'] > 0.9


def _small_parts_config(arg: str):
  """configs/parts_synthetic.py:<arg>,small with small evaluation sets (skips without WordNet)."""
  import pytest
  from wsabie_jax.experiments import tables
  from wsabie_jax.parts import wordnet
  try:
    wordnet.load()
  except wordnet.WordNetMissing as e:
    pytest.skip(str(e))
  c = tables.load('parts_synthetic:' + arg + ',small')
  c.proxy.update(num_valid=100, num_test=200)
  return c


def test_parts_method_trains_through_the_loop(tmp_path):
  """The proxy data from WordNet-mode synthetic images, trained and scored by the loop."""
  from wsabie_jax.experiments import run
  c = _small_parts_config('unshared,i')
  c.train.update(max_steps=60, eval_every_steps=30)
  m = run.train_and_evaluate(c, tmp_path)
  assert m['relations'] > 30 and m['unseen_relations'] > 0 and m['test_quadruplets'] == 200
  for key in ('annot_p@1', 'iw_pair_map', 'i_pair_map', 'io_pair_map', 'iw_triplet_p@1',
              'unseen_iw_couples_map', 'valid_i_pair_map'):
    assert 0 <= m[key] <= 1, key
  assert m['io_pair_map'] > m['i_pair_map']  # among all K² pairs the offset singles out relations
  assert (tmp_path / 'nearest_labels.json').exists()


def test_svm_baseline_row(tmp_path):
  from wsabie_jax.methods import parts as parts_run
  m = parts_run.svm_baseline(_small_parts_config('shared,iw'), grid=((0.1, 1), (1.0, 1)))
  assert 0 < m['svm_annot_p@1'] <= 1 and m['svm_setting'] in ('(0.1, 1)', '(1.0, 1)')

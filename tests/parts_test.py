"""Paper 002's quadruplet model: exact K² ranking, triplets, and the step's sparse updates."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.parts import step as parts
from wsabie_jax.parts import evaluation as parts_eval


@pytest.mark.parametrize('integers', [False, True])
def test_pair_ranks_match_brute_force_over_k_squared(integers):
  """Strictly above the true pair counts (§4.3.2's rank): with integer-valued
  scores many pairs tie with it and must not."""
  rng = np.random.default_rng(0)
  B, K, D = 6, 11, 4
  draw = (lambda *shape: rng.integers(-2, 3, shape).astype(float)) if integers else \
      (lambda *shape: rng.normal(size=shape))
  a, b = draw(B, K), draw(B, K)
  W = draw(K, D)
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
    if beta == 0.0:  # the "Image" scorings: their sorted count too
      cells = (jnp.asarray(offset, jnp.float32), jnp.asarray(np.argwhere(offset), jnp.int32))
      np.testing.assert_array_equal(parts_eval.sum_pair_ranks(
          *map(jnp.asarray, (a, b, lo, lp)), *(cells if offset.any() else ())), want)
    if integers:  # the fixture has ties with the true pair
      assert any(sum(f(q, i, j) == f(q, lo[q], lp[q]) for i, j in
                     itertools.product(range(K), repeat=2)) > 1 for q in range(B))
    ro, rp = parts_eval.triplet_ranks(*map(jnp.asarray, (a, b, W, lo, lp)), beta,
                                      jnp.asarray(offset, jnp.float32))
    np.testing.assert_array_equal(ro, [sum(f(q, i, lp[q]) > f(q, lo[q], lp[q]) for i in range(K))
                                       for q in range(B)])
    np.testing.assert_array_equal(rp, [sum(f(q, lo[q], j) > f(q, lo[q], lp[q]) for j in range(K))
                                       for q in range(B)])


@pytest.mark.parametrize('K', [1, 2, 257])
def test_the_sorted_count_is_the_grids_at_beta_zero(K):
  """sum_pair_ranks (a binary search a part label) counts what pair_ranks'
  K² grid counts when pairs score a_i + b_j (and an offset on some cells),
  float32 round-off and ties (scores on a grid of quarters) included, at
  sizes around the search's steps."""
  rng = np.random.default_rng(K)
  B = 16
  a, b = (jnp.asarray(np.round(rng.normal(size=(B, K)) * 4) / 4 + rng.normal(size=(B, 1)) * 1e3,
                      jnp.float32) for _ in range(2))
  lo, lp = (jnp.asarray(rng.integers(0, K, B), jnp.int32) for _ in range(2))
  grid = parts_eval.pair_ranks(a, b, jnp.ones((K, 3)), lo, lp, 0.0, jnp.zeros((K, K)), chunk=64)
  np.testing.assert_array_equal(parts_eval.sum_pair_ranks(a, b, lo, lp), grid)
  assert K == 1 or np.asarray(grid).max() > 0
  # With the WordNet offset on some cells, the true pairs' among them.
  offset = np.zeros((K, K), np.float32)
  offset[rng.integers(0, K, 3 * K), rng.integers(0, K, 3 * K)] = 2.5
  offset[np.asarray(lo)[::2], np.asarray(lp)[::2]] = 2.5
  offset = jnp.asarray(offset)
  grid = parts_eval.pair_ranks(a, b, jnp.ones((K, 3)), lo, lp, 0.0, offset, chunk=64)
  np.testing.assert_array_equal(parts_eval.sum_pair_ranks(
      a, b, lo, lp, offset, jnp.asarray(np.argwhere(np.asarray(offset)), jnp.int32)), grid)


def test_the_true_pair_never_ranks_below_itself():
  """The K² grid sums β W_i·W_j by a matmul, the true pair's score
  elementwise. Where their round-off differs (other summation orders, TF32
  on a GPU) the true pair must still not count above itself: far above every
  other pair, with rows wide in range, its rank is 0. (On a CPU the two sums
  agree in these cells, so this guards the accelerators.)"""
  rng = np.random.default_rng(0)
  B, K, D = 64, 9, 16
  W = (rng.normal(size=(K, D)) * 10 ** rng.uniform(-2, 2, size=(K, D))).astype(np.float32)
  lo = rng.integers(0, K, B)
  lp = (lo + 1 + rng.integers(0, K - 1, B)) % K
  a, b = np.zeros((B, K), np.float32), np.zeros((B, K), np.float32)
  top = 4 * np.abs(W @ W.T).max()  # a_lo + b_lp lifts the true pair over every other
  a[np.arange(B), lo], b[np.arange(B), lp] = top, top
  ranks = parts_eval.pair_ranks(*map(jnp.asarray, (a, b, W, lo, lp)), 1.0,
                                jnp.zeros((K, K), jnp.float32), chunk=4)
  np.testing.assert_array_equal(np.asarray(ranks), 0)


def test_evaluate_over_padded_batches_matches_brute_force_and_compiles_once():
  """`evaluate` scores every batch at one shape (the last padded with its
  last row, the padding cut off): each task's metrics equal the ranks
  counted quadruplet by quadruplet in numpy, for a set of 70 in batches of
  32 (two full, one padded) and for a set of 5; the second set, of another
  size, lowers no program."""
  rng = np.random.default_rng(1)
  d, K, D, F = 20, 7, 4, 3
  V, W, T = (rng.normal(size=s).astype(np.float32) for s in ((d, D), (K, D), (K, D)))
  R = np.stack([rng.integers(0, K, 4), rng.integers(0, K, 4)], 1)
  couples = np.stack([rng.integers(0, K, 6), rng.integers(0, K, 6)], 1)
  alpha, offset = 0.3, 100.0

  def quads(n):
    q = {f'{side}_idx_BxF': rng.integers(0, d, (n, F)).astype(np.int32) for side in ('obj', 'part')}
    q.update({f'{side}_val_BxF': rng.random((n, F)).astype(np.float32) for side in ('obj', 'part')})
    q.update(obj_label_B=rng.integers(0, K, n).astype(np.int32),
             part_label_B=rng.integers(0, K, n).astype(np.int32))
    return q

  def brute_force(q) -> dict:
    embed = lambda side: np.einsum('nf,nfd->nd', q[f'{side}_val_BxF'].astype(np.float64),
                                   V[q[f'{side}_idx_BxF']].astype(np.float64)) @ T.T
    a, b, lo, lp = embed('obj'), embed('part'), q['obj_label_B'], q['part_label_B']
    Ro = np.zeros((K, K))
    Ro[R[:, 0], R[:, 1]] = offset
    ranks = {'annot': np.concatenate([(a > a[np.arange(len(lo)), lo][:, None]).sum(1),
                                      (b > b[np.arange(len(lp)), lp][:, None]).sum(1)])}
    for name, beta, off in (('iw', alpha, np.zeros((K, K))), ('i', 0.0, np.zeros((K, K))),
                            ('io', 0.0, Ro)):
      s = lambda n, i, j: a[n, i] + b[n, j] + beta * W[i] @ W[j] + off[i, j]
      true = [s(n, lo[n], lp[n]) for n in range(len(lo))]
      ranks[f'{name}_pair'] = [sum(s(n, i, j) > true[n] for i in range(K) for j in range(K))
                               for n in range(len(lo))]
      ranks[f'{name}_triplet'] = (
          [sum(s(n, i, lp[n]) > true[n] for i in range(K)) for n in range(len(lo))]
          + [sum(s(n, lo[n], j) > true[n] for j in range(K)) for n in range(len(lo))])
      ranks[f'{name}_couples'] = [sum(s(n, i, j) > true[n] for i, j in couples)
                                  for n in range(len(lo))]
    out = {}
    for task, r in ranks.items():
      out.update(parts_eval.rank_metrics(np.asarray(r), f'{task}_'))
    return out

  evaluate = lambda q: parts_eval.evaluate(V, W, T, q, alpha, R, offset=offset, batch_size=32,
                                           chunk=4, scorings=('iw', 'i', 'io'),
                                           couples_Cx2=couples)
  for n in (70, 5):
    q = quads(n)
    with helpers.compilations_counted([]) as lowered:
      got = evaluate(q)
    want = brute_force(q)
    assert got.keys() == want.keys()
    for key in want:
      np.testing.assert_allclose(got[key], want[key], rtol=1e-12, err_msg=key)
    if n == 5:
      assert not lowered


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


def _reference_parts_update(cfg, state, batch):
  """Per quadruplet, in float64: constraint (6) or (7) as the step drew it, the
  same γ candidates, the first to violate the margin, the hinge of f_q with
  α f_L (§4.3.3 step 5) differentiated by hand; summed, stepped, projected."""
  from wsabie_jax.core import samplers
  V, W, U = (np.asarray(x, np.float64).copy() for x in state.params)
  T = W if cfg.model.shared else U
  K, a, margin = cfg.num_labels, cfg.model.alpha, cfg.loss.margin
  key_c, key_n = jax.random.split(jax.random.fold_in(state.key, state.step))
  B = len(batch['obj_label_B'])
  replace_part = np.asarray(jax.random.bernoulli(key_c, 0.5, (B,)))
  true = np.where(replace_part, batch['part_label_B'], batch['obj_label_B'])
  other = np.where(replace_part, batch['obj_label_B'], batch['part_label_B'])
  cand = np.asarray(samplers.uniform_negatives(key_n, jnp.asarray(true[:, None]),
                                               jnp.ones(B, jnp.int32), K, cfg.loss.num_draws))
  # Gradient pieces (row, vector) per table, in the order the step adds them.
  pieces = {'V': [], 'W': [], 'T': []}
  for q in range(B):
    side = 'part' if replace_part[q] else 'obj'
    idx, val = batch[f'{side}_idx_BxF'][q], batch[f'{side}_val_BxF'][q]
    x = val @ V[idx]
    t, o = true[q], other[q]
    f = lambda y: x @ T[y] + a * W[o] @ W[y]  # f_q with label y in the replaced slot
    violators = [y for y in cand[q] if f(y) > f(t) - margin]
    found = float(bool(violators) and batch['weight_B'][q] > 0)
    v = violators[0] if violators else cand[q][0]
    gx = found * (T[v] - T[t])
    pieces['V'] += [(i, w * gx) for i, w in zip(idx, val)]
    pieces['T'] += [(t, -found * x), (v, found * x)]
    pieces['W'] += [(o, found * a * (W[v] - W[t])), (t, -found * a * W[o]), (v, found * a * W[o])]
  if cfg.model.shared:
    T_pieces, W_pieces = [], pieces['T'][0::2] + pieces['T'][1::2] + (
        pieces['W'][0::3] + pieces['W'][1::3] + pieces['W'][2::3])
  else:
    T_pieces = pieces['T'][0::2] + pieces['T'][1::2]
    W_pieces = pieces['W'][0::3] + pieces['W'][1::3] + pieces['W'][2::3]
  accs = [np.asarray(x, np.float64).copy() for x in (state.acc_V, state.acc_W, state.acc_U)]

  def apply(table, acc, plist, lr):
    grad = np.zeros_like(table)
    for r, g in plist:
      grad[r] += g
      if cfg.optim.kind == 'adagrad':
        acc[r] += np.mean(g ** 2)
    rows = sorted({r for r, _ in plist})
    for r in rows:
      scale = 1.0 / (np.sqrt(acc[r]) + 1e-10) if cfg.optim.kind == 'adagrad' else 1.0
      table[r] -= lr * scale * grad[r]
      table[r] *= min(1.0, cfg.model.max_norm / np.linalg.norm(table[r]))
    return table

  V = apply(V, accs[0], pieces['V'], cfg.optim.learning_rate_V)
  W = apply(W, accs[1], W_pieces, cfg.optim.learning_rate_W)
  if not cfg.model.shared:
    U = apply(U, accs[2], T_pieces, cfg.optim.learning_rate_W)
  return V, W, U


@pytest.mark.parametrize('shared,optimizer', [(True, 'sgd'), (False, 'sgd'), (True, 'adagrad'),
                                              (False, 'adagrad')])
def test_step_matches_slow_reference(shared, optimizer):
  """The jitted step equals the per-quadruplet float64 reference; dropping α f_L
  from the step (or its violator test) would not."""
  cfg = parts.PartsConfig(12, model=parts.PartsModel(dim=6, shared=shared, alpha=0.5),
                          loss=parts.PartsLoss(num_draws=2, margin=0.1),
                          optim=parts.PartsOptim(optimizer, learning_rate_V=0.3, learning_rate_W=0.2))
  state = parts.init_state(jax.random.PRNGKey(3), cfg, 30)
  # Rows near the ball's surface (as training keeps them): some quadruplets
  # find a violator among the γ draws, some do not.
  grow = lambda t: np.asarray(t) * (0.95 / np.maximum(np.linalg.norm(np.asarray(t), axis=1,
                                                                    keepdims=True), 1e-12))
  state = state._replace(params=parts.PartsParams(*(jnp.asarray(grow(t), jnp.float32)
                                                    for t in state.params)))
  batch = _batch(B=10, d=30, K=12, seed=4)
  batch['obj_val_BxF'] = np.random.default_rng(5).uniform(0.2, 1.0, (10, 3)).astype(np.float32)
  batch['weight_B'][7] = 0.0  # a padded quadruplet: no update
  want = _reference_parts_update(cfg, state, batch)
  new, stats = parts.make_train_step(cfg)(state, jax.device_put(batch))
  for got, ref in zip(new.params, want):
    np.testing.assert_allclose(np.asarray(got), ref, atol=2e-5)
  assert 0 < int(stats['violator_found']) < 9


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
  from wsabie_jax.api import configs
  helpers.skip_without_wordnet()
  c = configs.load('parts_synthetic:' + arg + ',small')
  c.proxy.update(num_valid=100, num_test=200)
  return c


@pytest.mark.slow  # a whole training through the loop
def test_parts_method_trains_through_the_loop(tmp_path):
  """The proxy data from WordNet-mode synthetic images, trained and scored by the loop."""
  from wsabie_jax.api import run
  c = _small_parts_config('unshared,i')
  c.train.update(max_steps=60, eval_every_steps=30)
  m = run.train_and_evaluate(c, tmp_path)
  assert m['relations'] > 30 and m['unseen_relations'] > 0 and m['test_quadruplets'] == 200
  assert m['seen_test_quadruplets'] + m['unseen_test_quadruplets'] == 200 and m['unseen_test_quadruplets'] > 0
  for key in ('annot_p@1', 'iw_pair_map', 'i_pair_map', 'io_pair_map', 'iw_triplet_p@1',
              'unseen_iw_couples_map', 'valid_i_pair_map'):
    assert 0 <= m[key] <= 1, key
  assert m['io_pair_map'] > m['i_pair_map']  # among all K² pairs the offset singles out relations
  assert (tmp_path / 'nearest_labels.json').exists()


def test_svm_baseline_row(tmp_path):
  from wsabie_jax.methods import parts as parts_run
  m = parts_run.svm_baseline(_small_parts_config('shared,iw'), grid=((0.1, 1), (1.0, 1)))
  assert 0 < m['svm_annot_p@1'] <= 1 and m['svm_setting'] in ('(0.1, 1)', '(1.0, 1)')


def test_paper_protocol_config():
  """parts_synthetic.py:…,paper — paper 002's plain SGD rates and selection on
  validation Part-Object mean rank (a method metric, lower is better)."""
  from wsabie_jax.api import configs
  c = configs.load('parts_synthetic:unshared,i,paper,small')
  assert (c.optim.kind, c.optim.learning_rate_W, c.optim.learning_rate_V) == ('sgd', 0.01, 0.1)
  assert c.train.select_metric == 'i_pair_mean_rank'
  assert configs.load('parts_synthetic:unshared,i,small').train.select_metric == 'i_pair_map'

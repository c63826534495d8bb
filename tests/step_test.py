"""The jitted step against a slow per-pair numpy reference of Alg. 1's update."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import model
from wsabie_jax.core import row_optim
from wsabie_jax.core import row_scatter
from wsabie_jax.core import samplers
from wsabie_jax.data import batching
from tests import helpers
from wsabie_jax.wsabie import step as step_lib

D, d, Y, F, P, B, K = 4, 12, 9, 3, 2, 6, 5


def _tiny_batch(seed=0):
  rng = np.random.default_rng(seed)
  feat_idx = np.stack([rng.choice(d, F, replace=False) for _ in range(B)]).astype(np.int32)
  feat_val = rng.uniform(0.2, 1.0, (B, F)).astype(np.float32)
  feat_val[0, 2] = 0.0  # a padded slot
  pos = np.full((B, P), Y, np.int32)
  num_pos = rng.integers(1, P + 1, B).astype(np.int32)
  label = np.empty(B, np.int32)
  for b in range(B):
    pos[b, :num_pos[b]] = np.sort(rng.choice(Y, num_pos[b], replace=False))
    label[b] = pos[b, rng.integers(num_pos[b])]
  return batching.PairBatch(label_BxQ=label[:, None], weight_BxQ=np.ones((B, 1), np.float32),
                            pos_BxP=pos, num_pos_B=num_pos, feat_idx_BxF=feat_idx,
                            feat_val_BxF=feat_val)


def _reference_update(cfg, state, batch):
  """Per pair: first violator among the same draws, eq. (9)'s gradient; summed; projected."""
  V, W = (np.asarray(x, np.float64) for x in state.params)
  key = jax.random.fold_in(state.key, state.step)
  neg = np.asarray(samplers.uniform_negatives(key, jnp.asarray(batch.pos_BxP),
                                              jnp.asarray(batch.num_pos_B), Y, cfg.draws_per_pair))
  counts, firsts = [], []  # each pair's violators and its first (−1: none), for the test to check
  gV, gW = np.zeros_like(V), np.zeros_like(W)
  sqV, sqW = np.zeros(d), np.zeros(Y)  # Adagrad: Σ over occurrences of mean(g²)
  acc_V, acc_W = np.asarray(state.acc_V_d, np.float64), np.asarray(state.acc_W_Y, np.float64)
  for b in range(B):
    idx, val, y = batch.feat_idx_BxF[b], batch.feat_val_BxF[b], batch.label_BxQ[:, 0][b]
    x = val @ V[idx]

    def f(i):
      if cfg.model.score == 'dot':
        return W[i] @ x
      if cfg.model.score == 'neg_euclidean':  # paper 001: −‖W_i − x‖
        return -np.linalg.norm(W[i] - x)
      return -np.sum((W[i] - x) ** 2)

    def df_dw(i):  # ∂f_i/∂W_i and ∂f_i/∂x
      if cfg.model.score == 'dot':
        return x, W[i]
      if cfg.model.score == 'neg_euclidean':
        u = (x - W[i]) / np.linalg.norm(W[i] - x)
        return u, -u
      return 2 * (x - W[i]), 2 * (W[i] - x)

    num_neg = Y - batch.num_pos_B[b]
    budget = neg[b][:min(cfg.draws_per_pair, num_neg)]
    violators = [j for j, ybar in enumerate(budget) if f(ybar) > f(y) - 1]  # Alg. 1 line 11
    counts.append(len(violators))
    firsts.append(violators[0] if violators else -1)
    if cfg.loss.kind == 'auc':  # paper 000 Table 5: the first draw's plain hinge, weight 1
      if 0 not in violators:
        continue
      weight, chosen = 1.0, [0]
    elif not violators:
      continue
    else:
      if cfg.loss.rank_estimate == 'violator_count':
        rank = int(np.floor(num_neg * len(violators) / len(budget)))
      else:
        rank = num_neg // (violators[0] + 1)  # ⌊(Y−1)/N⌋
      weight = np.sum(1.0 / np.arange(1, rank + 1))  # L(rank), α_j = 1/j
      chosen = violators if cfg.loss.violators == 'all' else violators[:1]
    # Adagrad squares are per occurrence: each drawn violator's row, and the
    # pair's positive row and feature rows with the pair's summed gradient.
    gx, gw_y = np.zeros(D), np.zeros(D)
    for j in chosen:
      ybar, w = budget[j], weight / len(chosen)
      dw_ybar, dx_ybar = df_dw(ybar)
      dw_y, dx_y = df_dw(y)
      gW[ybar] += w * dw_ybar
      sqW[ybar] += np.mean((w * dw_ybar) ** 2)
      gw_y -= w * dw_y
      gx += w * (dx_ybar - dx_y)
    gW[y] += gw_y
    sqW[y] += np.mean(gw_y ** 2)
    for jj, v in zip(idx, val):
      gV[jj] += v * gx
      sqV[jj] += np.mean((v * gx) ** 2)
  new = []
  for table, grad, acc, sq, rows in ((V, gV, acc_V, sqV, np.unique(batch.feat_idx_BxF)),
                                     (W, gW, acc_W, sqW, None)):
    table = table.copy()
    # Every row the batch could touch: projecting an in-ball row changes nothing.
    touched = rows if rows is not None else np.union1d(batch.label_BxQ[:, 0], neg)
    for r in touched:
      if cfg.optim.kind == 'sgd':
        table[r] -= cfg.optim.learning_rate * grad[r]
      else:
        acc[r] += sq[r]
        table[r] -= cfg.optim.learning_rate * grad[r] / (np.sqrt(acc[r]) + 1e-10)
      table[r] *= min(1.0, cfg.model.max_norm / np.linalg.norm(table[r]))
    new.append(table)
  return new, counts, firsts


@pytest.mark.parametrize('score,optimizer,violators,estimate,tables,seed,num_draws', [
    ('dot', 'sgd', 'first', 'first_violator', 'rows', 3, K),
    ('dot', 'sgd', 'first', 'first_violator', 'whole', 3, K),
    ('neg_sq_euclidean', 'sgd', 'first', 'first_violator', 'rows', 3, K),
    ('neg_euclidean', 'sgd', 'first', 'first_violator', 'rows', 2, K),
    ('neg_euclidean', 'adagrad', 'all', 'violator_count', 'rows', 2, K),
    ('dot', 'adagrad', 'first', 'first_violator', 'rows', 3, K),
    ('dot', 'adagrad', 'first', 'first_violator', 'whole', 3, K),
    ('dot', 'sgd', 'all', 'violator_count', 'whole', 3, K),
    ('dot', 'adagrad', 'all', 'first_violator', 'rows', 3, K),
    ('dot', 'adagrad', 'all', 'first_violator', 'whole', 3, K),
    # A budget over the negatives (K = 12 > Y − |P|): draws past them never count.
    ('dot', 'sgd', 'first', 'first_violator', 'rows', 1, 12),
    ('dot', 'adagrad', 'all', 'violator_count', 'rows', 1, 12),
    ('dot', 'sgd', 'all', 'first_violator', 'whole', 1, 12)])
def test_step_matches_slow_reference(score, optimizer, violators, estimate, tables, seed,
                                     num_draws):
  """Both ways of reading the tables (gathered rows; whole, wsabie/table_reads.py),
  on pairs whose violator counts span 0 … K and whose first violator is not
  always the first draw (asserted: a fixture change cannot lose them)."""
  cfg = helpers.step_config(Y, dim=D, num_draws=num_draws, score=score, optimizer=optimizer,
                            learning_rate=0.3, max_norm=3.0, violators=violators,
                            rank_estimate=estimate, tables=tables)
  state = step_lib.init_state(jax.random.PRNGKey(1), d, cfg)
  # Rows scaled to the ball's edge (as training leaves many): scores far enough
  # apart that some draws clear the margin and some do not.
  state = state._replace(params=model.Params(*(model.project_rows(p * 20, 3.0) for p in state.params)))
  batch = _tiny_batch(seed)
  (want_V, want_W), counts, firsts = _reference_update(cfg, state, batch)
  most = min(num_draws, Y - int(batch.num_pos_B.min()))  # violators a pair can have
  assert 0 in counts and most in counts and any(0 < c < most for c in counts), counts
  assert max(firsts) > 0, firsts
  if num_draws > Y - 1:
    assert num_draws > Y - int(batch.num_pos_B.max())  # every pair's budget is cut
  new_state, stats = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  np.testing.assert_allclose(new_state.params.V_dxD, want_V, atol=1e-5)
  np.testing.assert_allclose(new_state.params.W_YxD, want_W, atol=1e-5)
  assert int(stats['violator_found']) == sum(c > 0 for c in counts)
  assert int(new_state.step) == 1


@pytest.mark.parametrize('optimizer,tables', [('sgd', 'rows'), ('adagrad', 'whole')])
def test_auc_step_matches_slow_reference(optimizer, tables):
  """The AUC loss (one uniform draw, its plain hinge, weight 1): exact against
  the reference, on pairs whose draw violates and pairs whose does not."""
  cfg = helpers.step_config(Y, loss='auc', dim=D, num_draws=K, optimizer=optimizer,
                            learning_rate=0.3, max_norm=3.0, tables=tables)
  state = step_lib.init_state(jax.random.PRNGKey(1), d, cfg)
  state = state._replace(params=model.Params(*(model.project_rows(p * 20, 3.0) for p in state.params)))
  batch = _tiny_batch(3)
  (want_V, want_W), counts, firsts = _reference_update(cfg, state, batch)
  assert 0 in counts and 1 in counts  # a draw that counts, and pairs whose does not
  new_state, stats = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  np.testing.assert_allclose(new_state.params.V_dxD, want_V, atol=1e-5)
  np.testing.assert_allclose(new_state.params.W_YxD, want_W, atol=1e-5)


def test_projection_keeps_touched_rows_in_ball_and_leaves_others():
  cfg = helpers.step_config(Y, dim=D, num_draws=K, learning_rate=50.0, max_norm=0.5)
  state = step_lib.init_state(jax.random.PRNGKey(2), d, cfg)
  before = jax.tree.map(np.asarray, state.params)
  batch = _tiny_batch(1)
  state, _ = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  for table in state.params:
    assert np.all(np.linalg.norm(np.asarray(table), axis=1) <= 0.5 + 1e-5)
  untouched = np.setdiff1d(np.arange(d), batch.feat_idx_BxF)
  np.testing.assert_array_equal(np.asarray(state.params.V_dxD)[untouched], before.V_dxD[untouched])
  assert not np.allclose(np.asarray(state.params.V_dxD), before.V_dxD)


@pytest.mark.parametrize('optimizer', ['sgd', 'adagrad'])
def test_dense_and_sparse_row_updates_agree(optimizer):
  """The two update paths (R ≥ N: summed per row; R < N: per piece) are one update."""
  rng = np.random.default_rng(3)
  table_NxD = jnp.asarray(rng.normal(0, 0.4, (10, D)), jnp.float32)
  rows_R = jnp.asarray([1, 4, 4, 7, 1, 4, 9], jnp.int32)  # repeats; rows 0, 2, 3, ... untouched
  grads_RxD = jnp.asarray(rng.normal(0, 1, (7, D)), jnp.float32)
  acc_N = row_optim.init_accumulator(10, optimizer, 0.1)
  out = [row_optim.update_rows(table_NxD, acc_N, rows_R, grads_RxD, learning_rate=0.3,
                               optimizer=optimizer, max_norm=0.8, dense=dense)
         for dense in (True, False)]
  np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-6)
  untouched = np.setdiff1d(np.arange(10), rows_R)
  np.testing.assert_array_equal(np.asarray(out[0][0])[untouched], np.asarray(table_NxD)[untouched])
  assert np.all(np.linalg.norm(np.asarray(out[0][0])[np.unique(rows_R)], axis=1) <= 0.8 + 1e-5)


def test_embedding_pieces_carry_their_mean_squares():
  """The feature table's pieces x_f·g_b (wsabie/table_reads.embed) carry their
  Adagrad terms x_f²·mean(g_b²), equal to update_rows' own from the pieces,
  so the update is the same either way."""
  pieces = _embedding_pieces(np.ones(B, bool)).pieces()
  np.testing.assert_allclose(pieces.sq_R, jnp.mean(jnp.square(pieces.grads_RxD), -1), rtol=1e-5)
  V_dxD, acc_d = _feature_table()
  given = row_optim.apply(V_dxD, acc_d, pieces, **_OPT)
  computed = row_optim.apply(V_dxD, acc_d, pieces._replace(sq_R=None), **_OPT)
  for a, b in zip(given, computed):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


_OPT = dict(learning_rate=0.3, optimizer='adagrad', max_norm=0.8)


def _feature_table():
  rng = np.random.default_rng(5)
  V_dxD = model.project_rows(jnp.asarray(rng.normal(0, 0.3, (d, D)), jnp.float32), 0.8)
  return V_dxD, row_optim.init_accumulator(d, 'adagrad', 0.1)


def _embedding_pieces(live_B):
  """The tiny batch's feature pieces, its images' gradients zero off `live_B`."""
  from wsabie_jax.data import packing
  from wsabie_jax.wsabie import table_reads
  batch = packing.from_padded(jax.tree.map(jnp.asarray, _tiny_batch(4)))
  _, pieces_of = table_reads.embed(_feature_table()[0], batch, B, whole=False)
  g_BxD = np.random.default_rng(6).normal(0, 1, (B, D)).astype(np.float32)
  return pieces_of(jnp.asarray(np.where(live_B[:, None], g_BxD, 0)))


@pytest.mark.parametrize('chunk_floats', [None, 3 * D], ids=['one_op', 'chunks'])
@pytest.mark.parametrize('live_B,trained_share,cap', [
    ([1, 0, 0, 0, 0, 0], 9, 2),      # 2 of 18 pieces live: the smaller cap, 18 // 9
    ([1, 0, 0, 0, 0, 0], 16, 4),     # … past 18 // 16 = 1: the cap 18 // LIVE_SHARE
    ([1, 0, 1, 1, 0, 1], 16, None),  # 11: the full update
    ([1] * B, 16, None)], ids=['few_live_small_cap', 'few_live', 'many_live', 'all_live'])
def test_live_pieces_update_is_the_full_update(monkeypatch, live_B, trained_share, cap,
                                               chunk_floats):
  """row_optim.update_live (a zero image gradient's pieces skipped when they
  fit a cap, R / 16 or R / 4; the full update otherwise; the pieces added
  unformed, in one op or in chunks of 3 (core/row_scatter.py)) equals
  update_rows of every piece; the branch taken is the one the count says."""
  if chunk_floats:
    monkeypatch.setattr(row_scatter, 'CHUNK_FLOATS', chunk_floats)
  monkeypatch.setattr(row_optim, 'LIVE_SHARE_TRAINED', trained_share)
  grad = _embedding_pieces(np.asarray(live_B, bool))
  live = int(np.sum((np.asarray(grad.val_R) != 0) & np.asarray(live_B, bool)[grad.src_R]))
  R = grad.rows_R.shape[0]
  fits = [c for c in (R // trained_share, R // row_optim.LIVE_SHARE) if live <= c]
  assert (fits[0] if fits else None) == cap
  V_dxD, acc_d = _feature_table()
  want = row_optim.apply(V_dxD, acc_d, grad.pieces(), **_OPT)
  got = jax.jit(lambda V, a: row_optim.apply(V, a, grad, **_OPT))(V_dxD, acc_d)
  assert not np.allclose(want[0], V_dxD)  # not vacuous
  for a, b in zip(got, want):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_padding_pairs_do_not_update():
  cfg = helpers.step_config(Y, dim=D, num_draws=K, learning_rate=1.0)
  state = step_lib.init_state(jax.random.PRNGKey(3), d, cfg)
  before = jax.tree.map(np.asarray, state.params)
  batch = _tiny_batch(2)._replace(weight_BxQ=np.zeros((B, 1), np.float32))
  state, stats = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  np.testing.assert_allclose(np.asarray(state.params.W_YxD), before.W_YxD, atol=1e-7)
  assert int(stats['pairs']) == 0


@pytest.mark.parametrize('loss', ['exact', 'auc'])
def test_reference_losses_reduce_exact_rank_loss(loss):
  """OWPC-SGD and AUC steps lower eq. (6)'s exact loss on a fixed batch."""
  from wsabie_jax.wsabie import warp
  cfg = helpers.step_config(Y, dim=D, loss=loss, num_draws=K, learning_rate=0.05, max_norm=3.0)
  state = step_lib.init_state(jax.random.PRNGKey(4), d, cfg)
  batch = jax.device_put(_tiny_batch(3))
  mask = jnp.zeros((B, Y + 1), bool).at[jnp.arange(B)[:, None], batch.pos_BxP].set(True)[:, :-1]

  def exact_loss(params):
    x = model.embed_images(params.V_dxD[batch.feat_idx_BxF], batch.feat_val_BxF)
    return float(jnp.sum(warp.exact_rank_loss(x @ params.W_YxD.T, batch.label_BxQ[:, 0], mask, Y)))

  before = exact_loss(state.params)
  step = step_lib.make_train_step(cfg)
  for _ in range(30):
    state, _ = step(state, batch)
  assert exact_loss(state.params) < 0.8 * before


@pytest.mark.parametrize('tables', ['rows', 'whole'])
def test_exact_step_counts_the_pairs_with_a_violator(tables):
  """The exact rank's step reports the real pairs with at least one violator
  (a negative above the positive's score − margin), counted here from every
  label's score; both ways of reading the tables, a padding pair left out."""
  cfg = helpers.step_config(Y, dim=D, loss='exact', max_norm=3.0, tables=tables)
  state = step_lib.init_state(jax.random.PRNGKey(4), d, cfg)
  state = state._replace(params=model.Params(*(model.project_rows(p * 20, 3.0) for p in state.params)))
  batch = _tiny_batch(1)._replace(weight_BxQ=np.asarray([[1.0]] * (B - 1) + [[0.0]], np.float32))
  x = model.embed_images(state.params.V_dxD[batch.feat_idx_BxF], batch.feat_val_BxF)
  S = np.asarray(model.score_all(x, state.params.W_YxD, cfg.model.score))
  positive = np.zeros((B, Y + 1), bool)
  positive[np.arange(B)[:, None], batch.pos_BxP] = True
  pos_score = S[np.arange(B), batch.label_BxQ[:, 0]][:, None]
  rank = helpers.violator_counts(S, pos_score, positive[:, :Y], cfg.loss.margin)
  want = int(np.sum((rank > 0) & (batch.weight_BxQ[:, 0] > 0)))
  assert 0 < want < B - 1, rank  # not vacuous: some pairs with, some without
  _, stats = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  assert int(stats['violator_found']) == want and int(stats['pairs']) == B - 1


def test_bad_config_names_the_field():
  with pytest.raises(ValueError, match='LossConfig.kind='):
    step_lib.LossConfig(kind='warpp')


@pytest.mark.parametrize('optimizer', ['sgd', 'adagrad'])
def test_logistic_auc_with_l2_matches_slow_reference(optimizer):
  """Paper 003's Opt-AUC: one uniform negative per pair, log(1 + e^(f_ȳ − f_y))
  whether or not it violates, with λ·row added to each touched row's
  gradient per occurrence (λ = 0.01 in the paper; 0.2 here to show). With
  Adagrad each occurrence's mean square — λ·row included — joins its row's
  accumulator before the row moves (left out for the feature rows, the
  update was wrong with every test passing)."""
  cfg = helpers.step_config(Y, dim=D, loss='auc', pairwise='logistic', learning_rate=0.3,
                            max_norm=10.0, l2=0.2, optimizer=optimizer)
  state = step_lib.init_state(jax.random.PRNGKey(5), d, cfg)
  batch = _tiny_batch(4)
  V, W = (np.asarray(x, np.float64) for x in state.params)
  key = jax.random.fold_in(state.key, state.step)
  neg = np.asarray(samplers.uniform_negatives(key, jnp.asarray(batch.pos_BxP),
                                              jnp.asarray(batch.num_pos_B), Y, 1))[:, 0]
  pieces = {'V': [], 'W': []}  # (row, its occurrence's gradient)
  for b in range(B):
    idx, val, y = batch.feat_idx_BxF[b], batch.feat_val_BxF[b], batch.label_BxQ[:, 0][b]
    x = val @ V[idx]
    slope = 1 / (1 + np.exp(W[y] @ x - W[neg[b]] @ x))  # −∂ℓ/∂(f_y − f_ȳ) = σ(f_ȳ − f_y)
    pieces['W'] += [(y, -slope * x + 0.2 * W[y]), (neg[b], slope * x + 0.2 * W[neg[b]])]
    pieces['V'] += [(j, v * (-slope * (W[y] - W[neg[b]])) + 0.2 * V[j]) for j, v in zip(idx, val)]
  want = {}
  for name, table, acc in (('V', V, state.acc_V_d), ('W', W, state.acc_W_Y)):
    grad, acc = np.zeros_like(table), np.resize(np.asarray(acc, np.float64), len(table))
    for r, g in pieces[name]:  # (an SGD state's accumulator is a placeholder: unused)
      grad[r] += g
      acc[r] += np.mean(g ** 2)
    rate = 0.3 / (np.sqrt(acc)[:, None] + 1e-10) if optimizer == 'adagrad' else 0.3
    want[name] = table - rate * grad
  new, stats = step_lib.make_train_step(cfg)(state, jax.device_put(batch))
  np.testing.assert_allclose(new.params.V_dxD, want['V'], atol=1e-5)
  np.testing.assert_allclose(new.params.W_YxD, want['W'], atol=1e-5)
  assert int(stats['violator_found']) == B  # every draw counts under the logistic loss


def test_init_std_and_config_checks():
  cfg = helpers.step_config(Y, dim=64, init_std=0.01, max_norm=10.0)
  V = np.asarray(step_lib.init_state(jax.random.PRNGKey(0), 200, cfg).params.V_dxD)
  assert V.std() == pytest.approx(0.01, rel=0.05)
  with pytest.raises(ValueError, match='pairwise'):
    helpers.step_config(Y, loss='exact', pairwise='logistic')
  with pytest.raises(ValueError, match='l2'):
    helpers.step_config(Y, l2=-1.0)

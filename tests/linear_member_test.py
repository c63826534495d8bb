"""model.ensemble (wsabie/linear_member.py): paper 000 Table 7's ensemble of
WSABIE with a full-rank member (the paper's One-vs-Rest, logistic regression,
the L2-loss linear SVM or the Gaussian-kernel SVM), the member and its weight
chosen on validation, saved with the run and read back by evaluate."""
import json
import logging

import jax.numpy as jnp
import numpy as np
import pytest

from tests.train_test import _tiny_config
from wsabie_jax.api import run
from wsabie_jax.baselines import ensemble, kernel, linear
from wsabie_jax.core import evaluation
from wsabie_jax.data import batching, dataset
from wsabie_jax.methods import common
from wsabie_jax.wsabie import fitting, linear_member


def _scorer(V, W):
  return (lambda i, v: evaluation.embed(jnp.asarray(V), i, v)), jnp.asarray(W)


def _padded(rng, n, d, labels_of):
  rows = [rng.choice(d, size=3, replace=False) for _ in range(n)]
  ds = dataset.from_lists([(r, np.array([1.0, 0.3, 0.3], np.float32)) for r in rows],
                          [labels_of(r) for r in rows], d, [f'l{i}' for i in range(6)])
  return batching.pad_images(ds)


def test_the_ensembles_scores_are_each_members_standardised_and_summed():
  """Ranked through (embed, identity labels) by dot scores: z(x V Wᵀ) + λ z(x U)
  per image, z standardising over the labels (numpy reference)."""
  rng = np.random.default_rng(0)
  d, D, Y = 20, 4, 6
  V, W, U = rng.normal(size=(d, D)), rng.normal(size=(Y, D)), rng.normal(size=(d, Y))
  idx, val = rng.integers(0, d, (5, 3)), rng.random((5, 3)).astype(np.float32)
  x = np.zeros((5, d))
  np.add.at(x, (np.arange(5)[:, None], idx), val)
  z = lambda s: (s - s.mean(1, keepdims=True)) / (s.std(1, keepdims=True) + 1e-6)
  embed, labels = linear_member.combined(_scorer(V, W), U.astype(np.float32), 0.5)
  got = np.asarray(embed(jnp.asarray(idx), jnp.asarray(val)) @ labels.T)
  np.testing.assert_allclose(got, z(x @ V @ W.T) + 0.5 * z(x @ U), rtol=1e-4, atol=1e-4)
  own = _scorer(V, W)
  assert linear_member.combined(own, U, 0.0) is own  # λ = 0: WSABIE alone, unchanged
  assert linear_member.combined(own, None, 0.0) is own  # (WSABIE alone chosen: no member to read)


def test_the_weight_is_the_validation_splits_choice():
  """Labels a linear rule of the features: the One-vs-Rest weights that encode
  it win the largest λ; a member of noise beside a WSABIE that encodes it gets λ 0."""
  rng = np.random.default_rng(1)
  d, Y = 12, 6
  labels_of = lambda r: np.array([r[0] % Y])  # the label of its first (largest) feature
  padded = _padded(rng, 200, d, labels_of)
  truth_dxY = np.zeros((d, Y), np.float32)
  truth_dxY[np.arange(d), np.arange(d) % Y] = 1.0
  noise = _scorer(rng.normal(size=(d, 3)), rng.normal(size=(Y, 3)))
  kind, weight, got = linear_member.choose(noise, {'one_vs_rest': truth_dxY}, padded, 'map',
                                           {'ks': (1,)})
  assert kind == 'one_vs_rest' and weight > 0
  assert got[kind, weight]['map'] > got[None, 0.0]['map'] + 0.1
  # WSABIE holding the truth (D = Y, W the identity) against a member of noise
  exact = _scorer(truth_dxY, np.eye(Y))
  kind, weight, got = linear_member.choose(
      exact, {'one_vs_rest': rng.normal(size=(d, Y)).astype(np.float32)}, padded, 'map',
      {'ks': (1,)})
  assert (kind, weight) == (None, 0.0)
  assert got[None, 0.0]['map'] == max(m['map'] for m in got.values())
  # Two members: the one that encodes the rule is chosen, whichever comes first
  for order in (('noise', 'truth'), ('truth', 'noise')):
    members = {'noise': rng.normal(size=(d, Y)).astype(np.float32), 'truth': truth_dxY}
    kind, weight, _ = linear_member.choose(noise, {k: members[k] for k in order}, padded, 'map',
                                           {'ks': (1,)})
    assert kind == 'truth' and weight > 0


def test_a_kernel_member_round_trips_and_scores_as_trained(tmp_path):
  """The kernel member's arrays saved by name, read back as a KernelMember
  that the ensemble scores as the one trained."""
  rng = np.random.default_rng(0)
  padded = _padded(rng, 40, 12, lambda r: [r[0] % 6])
  train = dataset.from_lists([(r[r_val > 0], r_val[r_val > 0]) for r, r_val in
                              zip(padded.feat_idx_nxF, padded.feat_val_nxF)],
                             [[p for p in pos if p < 6] for pos in padded.pos_nxP], 12,
                             [f'l{i}' for i in range(6)])
  member = linear_member.train('kernel', train, _tiny_config().model, seed=0)
  assert isinstance(member, kernel.KernelMember)
  linear_member.save(tmp_path, member, 2.0, 'kernel')
  got = linear_member.load(tmp_path)
  assert got['kind'] == 'kernel' and got['weight'] == 2.0
  for want, back in zip(member, got['member']):
    np.testing.assert_array_equal(back, want)
  own = _scorer(rng.normal(size=(12, 4)), rng.normal(size=(6, 4)))
  scores = [evaluation.evaluate_ranking(*linear_member.combined(own, m, 2.0), padded, ks=(1,))
            for m in (member, got['member'])]
  assert scores[0] == scores[1]
  assert scores[0]['map'] != evaluation.evaluate_ranking(*own, padded, ks=(1,))['map']


def test_the_member_file_round_trips_and_a_damaged_one_is_named(tmp_path):
  assert linear_member.load(tmp_path) is None
  U = np.arange(12, dtype=np.float32).reshape(4, 3)
  linear_member.save(tmp_path, U, 0.5, 'logistic')
  got = linear_member.load(tmp_path)
  np.testing.assert_array_equal(got['member'], U)
  assert got['weight'] == 0.5 and got['kind'] == 'logistic'
  assert not list(tmp_path.glob('*.part*'))
  (tmp_path / 'alone').mkdir()
  linear_member.save(tmp_path / 'alone', U, 0.0, 'none')
  assert linear_member.load(tmp_path / 'alone')['member'].shape == (0, 0)  # λ 0 keeps no table
  path = tmp_path / linear_member.FILE
  whole = path.read_bytes()
  raw = bytearray(whole)
  raw[whole.find(U.tobytes()) + 5] ^= 0xFF  # a bit of U's weights flipped on disk
  path.write_bytes(bytes(raw))
  with pytest.raises(ValueError, match=str(path)):
    linear_member.load(tmp_path)
  path.write_bytes(whole[:len(whole) // 2])  # cut short
  with pytest.raises(ValueError, match=str(path)):
    linear_member.load(tmp_path)


def _counts(rng, n, d, Y):
  """n rows of 1–6 word counts over d words, each labelled by its words mod Y."""
  rows = [rng.choice(d, size=rng.integers(1, 7), replace=False) for _ in range(n)]
  return dataset.from_lists([(r, rng.integers(1, 5, len(r)).astype(np.float32)) for r in rows],
                            [np.unique(r[:2] % Y) for r in rows], d, [f'l{i}' for i in range(Y)])


@pytest.mark.parametrize('kind', linear_member.LINEAR)
def test_an_idf_member_ranks_as_the_member_trained_on_tf_idf_rows(kind):
  """model.ensemble_idf: the member kept as diag(idf)·U scores every test row,
  standardised over the labels, as U trained on the tf-idf rows scores the
  test rows' own tf-idf weighting (idf from the training split), and not as
  the member trained on the features as they are."""
  rng = np.random.default_rng(2)
  train, test = _counts(rng, 300, 40, 5), _counts(rng, 50, 40, 5)
  config = _tiny_config()
  model = config.model.copy_and_resolve_references()
  model.ensemble_idf = kind
  kept = linear_member.train(kind, train, model, seed=0)
  idf_d = dataset.idf(train)
  direct = linear_member.train(kind, dataset.idf_weighted(train, idf_d), config.model, seed=0)
  plain = linear_member.train(kind, train, config.model, seed=0)
  x, x_tfidf = (batching.pad_images(ds) for ds in (test, dataset.idf_weighted(test, idf_d)))
  z = lambda U, p: np.asarray(ensemble.standardised(linear.linear_scores(U)(
      jnp.asarray(p.feat_idx_nxF), jnp.asarray(p.feat_val_nxF))))
  np.testing.assert_allclose(z(kept, x), z(direct, x_tfidf), atol=2e-4)
  assert np.abs(z(plain, x) - z(direct, x_tfidf)).max() > 0.05


@pytest.mark.parametrize('idf', [False, True])
@pytest.mark.parametrize('kind', linear_member.LBFGS_MEMBERS)
def test_an_lbfgs_member_started_from_the_splits_ends_where_a_fresh_one_does(kind, idf, caplog):
  """The refit's member on the whole training file starts from the split's
  (`start`; an idf member's diag(idf)·U divided back by the split's idf) and
  scores every test row, standardised over the labels, as a fresh search on
  the whole file does, in fewer L-BFGS iterations."""
  rng = np.random.default_rng(3)
  whole, test = _counts(rng, 400, 40, 5), _counts(rng, 50, 40, 5)
  model = _tiny_config().model.copy_and_resolve_references()
  model.ensemble_idf = kind if idf else 'none'
  split = linear_member.train(kind, whole.subset(np.arange(360)), model, seed=0)
  with caplog.at_level(logging.INFO, 'wsabie_jax'):
    fresh = linear_member.train(kind, whole, model, seed=0)
    warm = linear_member.train(kind, whole, model, seed=0, start=split)
  taken = [int(line.split(' took ')[1].split()[0]) for line in caplog.messages if ' took ' in line]
  assert 'from the split\'s solution' in caplog.messages[-1] and taken[1] < taken[0], taken
  x = batching.pad_images(test)
  z = lambda U: np.asarray(ensemble.standardised(linear.linear_scores(U)(
      jnp.asarray(x.feat_idx_nxF), jnp.asarray(x.feat_val_nxF))))
  np.testing.assert_allclose(z(warm), z(fresh), atol=0.05)  # (the split's own: 0.96–1.46 off)


def test_idf_is_the_smooth_inverse_document_frequency_and_rows_end_unit_length():
  """idf = log((1 + n) / (1 + df)) + 1 by hand on 3 rows; a feature in every
  row weighs 1, one past the training split's features 0."""
  train = dataset.from_lists([(np.array([0, 1]), np.array([1.0, 2.0])),
                              (np.array([0]), np.array([3.0])),
                              (np.array([0, 2]), np.array([1.0, 1.0]))], [[0]] * 3, 4, ['a'])
  np.testing.assert_allclose(dataset.idf(train), [1.0, np.log(4 / 2) + 1, np.log(4 / 2) + 1,
                                                  np.log(4) + 1], rtol=1e-6)
  got = dataset.idf_weighted(train, dataset.idf(train)[:3])
  want = np.array([1.0, 2 * (np.log(2) + 1)]) / np.hypot(1.0, 2 * (np.log(2) + 1))
  np.testing.assert_allclose(got.feat_val[:2], want, rtol=1e-6)
  np.testing.assert_allclose(dataset.idf_weighted(
      dataset.from_lists([(np.array([0, 3]), np.array([1.0, 5.0]))], [[0]], 4, ['a']),
      dataset.idf(train)[:3]).feat_val, [1.0, 0.0])


@pytest.mark.parametrize('n, d, Y, nnz, score, seen, want', [
    (19_149, 11_975, 433, 580_000, 'dot', None, 'one_vs_rest'),  # debtags: X too large to read dense
    (10_328, 501, 983, 204_000, 'dot', None, 'one_vs_rest+svm'),  # Delicious: n·d·Y 5·10⁹
    (40_000, 501, 983, 400_000, 'dot', None, 'one_vs_rest'),      # 2·10¹⁰: One-vs-Rest alone
    (40_000, 501, 983, 800_000, 'dot', None, 'none'),  # its epochs 7.9·10⁹ entries past 2^32
    (3_600, 500, 374, 33_000, 'dot', None, 'one_vs_rest+logistic+svm+kernel'),  # Corel5k
    (1_090, 295, 6, None, 'dot', None, 'one_vs_rest+logistic+svm+kernel'),    # scene (dense)
    (19_367, 501, 22, 455_000, 'dot', None, 'one_vs_rest+logistic+svm'),  # tmc2007-500: n past 4,096
    (4_000, 500, 600, 40_000, 'dot', None, 'one_vs_rest+logistic+svm'),  # n·m·Y past 2^32
    (50, 1_000_000, 433, 500, 'dot', None, 'none'),           # the table past 2^26 floats
    (50, 100, 5_000, 500, 'dot', None, 'none'),               # labels past MAX_LABELS
    (50, 500, 100, 500, 'neg_euclidean', None, 'none'),       # scores it does not standardise
    (50, 500, 100, 500, 'dot', 80, 'none'),                   # a zero-shot hold-out
])
def test_auto_adds_the_members_where_they_are_cheap(n, d, Y, nnz, score, seen, want):
  config = _tiny_config()
  config.model.score = score
  with config.model.ignore_type():
    config.model.ensemble = 'auto'
  assert fitting.fitted(config, _sizes(n, d, Y, nnz, seen))['model.ensemble'] == want


def _sizes(n, d, Y, nnz=None, seen=None):
  """A training split's sizes as fitting reads them (nnz None: not said, n·d)."""
  from types import SimpleNamespace
  return SimpleNamespace(num_labels=Y, num_features=d, num_seen_labels=seen,
                         label_indptr=np.arange(0, 2 * n + 1, 2),
                         **({} if nnz is None else {'feat_indptr': np.array([0, nnz])}))


@pytest.mark.parametrize('seconds, want', [
    (0.0, 'one_vs_rest+logistic+svm+kernel'),  # no budget: the whole limits
    (300.0, 'one_vs_rest+logistic+svm+kernel'),  # past a minute: no more than a minute's
    (60.0, 'one_vs_rest+logistic+svm+kernel'),
    (30.0, 'one_vs_rest+logistic+svm'),  # n·m·Y 2.8·10⁹ past 2^32 · 30/60
    (10.0, 'one_vs_rest+svm'),           # n·d·Y 6.7·10⁸ past 2^31 · 10/60
    (2.0, 'one_vs_rest'),                # past 2^33 · 2/60 = 2.9·10⁸
    (1.0, 'none'),                       # One-vs-Rest's 1.2·10⁸ entries past 2^32 / 60
])
def test_auto_scales_the_limits_to_a_budget_under_a_minute(seconds, want):
  """Corel5k's training split (3,600 × 500 × 374, 33,000 values): each
  member kept where its cost fits the limits × budget / 60 s, so a short run
  spends no larger share of its seconds on them than a minute's run does."""
  config = _tiny_config(max_seconds=seconds)
  with config.model.ignore_type():
    config.model.ensemble = 'auto'
  assert fitting.fitted(config, _sizes(3_600, 500, 374, 33_000))['model.ensemble'] == want
  assert linear_member.budget_share(seconds) == (1.0 if not seconds else min(1.0, seconds / 60))


def test_the_shipped_corel5k_trains_the_members_its_budget_affords():
  """docs/RESULTS.md "The members in a short budget": the Mulan config on the
  shipped Corel5k (its 90% training split, 4,050 images) names these members
  at these budgets, as `launch/train.py --config.train.max_seconds=S` fits them."""
  from wsabie_jax.api import configs
  from wsabie_jax.methods import wsabie
  config = configs.load('wsabie_mulan')
  got = {}
  for seconds in (1.0, 2.0, 10.0, 30.0, 60.0, 0.0):
    config.train.max_seconds = seconds
    got[seconds] = wsabie.fit(config)[1]['model.ensemble']
  every = 'one_vs_rest+logistic+svm+kernel'
  assert got == {1.0: 'none', 2.0: 'one_vs_rest', 10.0: 'one_vs_rest+svm',
                 30.0: 'one_vs_rest+logistic+svm', 60.0: every, 0.0: every}


def test_auto_costs_the_kernel_member_at_the_configs_landmarks():
  """n·m·Y past 2^32 at 2,048 landmarks (4,000 × 2,048 × 600), within it at
  the config's 256: the kernel member joins."""
  config = _tiny_config()
  with config.model.ignore_type():
    config.model.ensemble = 'auto'
  config.model.ensemble_kernel_landmarks = 256
  assert fitting.fitted(config, _sizes(4_000, 500, 600, 40_000))['model.ensemble'] == \
      'one_vs_rest+logistic+svm+kernel'


def test_a_run_tests_the_ensemble_and_evaluate_reads_it_back(tmp_path):
  """The member trained before the steps (its seconds in the budget's), its λ
  chosen on validation, WSABIE alone's figures beside; evaluate reads the
  saved member (here rewritten at λ = 1) and scores what the ensemble scores."""
  config = _tiny_config(num_epochs=3, eval_every_steps=20)
  config.model.ensemble = 'one_vs_rest+logistic+svm+ridge+kernel'
  got = run.train_and_evaluate(config, tmp_path)
  assert got['ensemble_weight'] in linear_member.WEIGHTS
  assert got['ensemble_member'] in ('none',) + linear_member.MEMBERS
  assert 0 < got['ensemble_seconds'] <= got['train_seconds']
  assert {'wsabie_p@1', 'wsabie_map'} <= set(got)
  if got['ensemble_weight'] == 0:
    assert got['p@1'] == got['wsabie_p@1']
  metrics = json.loads((tmp_path / 'metrics.json').read_text())
  assert metrics['ensemble_weight'] == got['ensemble_weight']
  restored = run.Restored(tmp_path)
  assert restored.evaluate()['map'] == pytest.approx(got['map'], abs=1e-6)
  member = linear_member.load(tmp_path)
  assert member['kind'] == got['ensemble_member']
  restored = run.Restored(tmp_path)
  train, _, test = common.load_splits(restored.config)
  if got['ensemble_weight'] == 0:  # WSABIE alone: the choice kept, no d×Y table
    assert member['member'].size == 0
    member = {'kind': 'one_vs_rest',
              'member': linear_member.train('one_vs_rest', train, config.model, config.seed)}
  linear_member.save(tmp_path, member['member'], 1.0, member['kind'])
  restored = run.Restored(tmp_path)
  own = restored.method.scorer(restored.config, restored.vocab, restored.state)
  want = common.evaluate_split(restored.config, train, test,
                               linear_member.combined(own, member['member'], 1.0), baseline=False)
  assert restored.evaluate()['map'] == pytest.approx(want['map'], abs=1e-6)
  assert want['map'] != pytest.approx(got['wsabie_map'], abs=1e-6)  # (the member moved it)


def test_a_refit_run_trains_the_member_again_on_the_whole_training_file(tmp_path, monkeypatch,
                                                                        caplog):
  """The run's model is the refit (train.refit) on all 600 training images: the
  member saved beside it is trained on them too, at the weight chosen with the
  best state (here forced to 1) on the 60 held out, as the refit's own work
  (before its checkpoint is saved: its seconds are the refit's, in the budget).
  The choice is made once, before the refit is decided on, and the test reads
  it. The member on the whole file is offered the split's as its start."""
  chose, starts, train_member = [], [], linear_member.train
  monkeypatch.setattr(linear_member, 'choose',
                      lambda *a, **k: chose.append(1) or ('one_vs_rest', 1.0, {}))
  monkeypatch.setattr(linear_member, 'train', lambda *a, start=None: starts.append(
      (start, train_member(*a))) or starts[-1][1])
  config = _tiny_config(num_epochs=50, eval_every_steps=5, patience=2, refit=True)
  config.optim.kind, config.optim.learning_rate = 'sgd', 30.0  # (wrecked after a few validations)
  config.model.ensemble = 'one_vs_rest'
  with caplog.at_level(logging.INFO, 'wsabie_jax'):
    got = run.train_and_evaluate(config, tmp_path)
  assert got['refit_steps'] > 0 and got['ensemble_weight'] == 1.0 and chose == [1]
  assert len(starts) == 2 and starts[0][0] is None and starts[1][0] is starts[0][1]
  log = caplog.text
  assert log.count('one_vs_rest trained on 600 images') == 1
  assert log.index('one_vs_rest trained on 600 images') < log.index('saved checkpoint refit/')
  whole = config.copy_and_resolve_references()
  whole.data.validation_fraction = 0.0
  train = common.load_splits(whole)[0]
  assert train.num_images == 600
  want = linear_member.train('one_vs_rest', train, config.model, config.seed)
  np.testing.assert_array_equal(linear_member.load(tmp_path)['member'], want)


@pytest.mark.parametrize('where', ['ensemble', 'pick'])
def test_a_ridge_member_past_its_closed_form_is_refused_before_the_workdir_is_written(
    tmp_path, monkeypatch, where):
  """model.ensemble naming 'ridge' (or a pick of it) on a training file
  whose smaller side is past ridge.MAX_RANK: a ConfigError (one line at the
  command line) naming the field and the sizes, raised while the run is
  built, so the workdir is left as it was (here: not made)."""
  from wsabie_jax.baselines import ridge
  from wsabie_jax.config.schema import ConfigError
  monkeypatch.setattr(ridge, 'MAX_RANK', 8)
  config = _tiny_config(num_epochs=1)
  if where == 'ensemble':
    config.model.ensemble = 'one_vs_rest+ridge'
  else:
    config.model.update(ensemble='one_vs_rest', ensemble_pick='ridge:1')
  with pytest.raises(ConfigError, match=r"trains the ridge member: \d+ images × \d+ features.*past 8"):
    run.train_and_evaluate(config, tmp_path / 'run')
  assert not (tmp_path / 'run').exists()

"""The panel suite's pieces that need no LightFM: reading a panel entry, the
data-agnostic config's rules, the ratio table."""
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from tests import helpers
from wsabie_jax import config as config_lib
from wsabie_jax.api import fold_choice
from wsabie_jax.config import args
from wsabie_jax.data import corel5k_paths, load_splits
from wsabie_jax.benchmarks import panel, panel_search, panel_table, peers, reach
from wsabie_jax.wsabie import linear_member
from wsabie_jax.core import native_rows
from wsabie_jax.data import batching
from wsabie_jax.wsabie import fitting


def _mulan_folder(tmp_path, name='toy', train_rows=None):
  """Corel5k as a Mulan folder; its first `train_rows` training images only
  where given (the wiring tested does not need the whole set's seconds)."""
  import shutil
  folder = tmp_path / name
  folder.mkdir()
  train, test, labels = corel5k_paths()
  lines = pathlib.Path(train).read_text().splitlines(keepends=True)
  data_at = next(i for i, line in enumerate(lines) if line.lower().startswith('@data')) + 1
  rows = lines[data_at:] if train_rows is None else lines[data_at:data_at + train_rows]
  (folder / f'{name}-train.arff').write_text(''.join(lines[:data_at] + rows))
  shutil.copy(test, folder / f'{name}-test.arff')
  shutil.copy(labels, folder / f'{name}.xml')
  return folder


def test_panel_entries(tmp_path):
  name, data = panel.data_config(str(_mulan_folder(tmp_path)))
  assert name == 'toy' and data.kind == 'mulan' and data.validation_fraction == 0.0
  assert data.test_path.endswith('toy-test.arff')
  name, data = panel.data_config('libsvm:/x/a.txt:/x/b.txt')
  assert (name, data.kind, data.train_path, data.test_path) == ('a', 'libsvm', '/x/a.txt', '/x/b.txt')
  (tmp_path / 'empty').mkdir()
  with pytest.raises(ValueError, match='expected one NAME-train.arff'):
    panel.data_config(str(tmp_path / 'empty'))


def test_a_held_out_fifth_of_the_training_file_stands_for_the_test_file(tmp_path, monkeypatch):
  monkeypatch.setenv('WSABIE_JAX_CACHE', str(tmp_path / 'cache'))
  folder = _mulan_folder(tmp_path, train_rows=500)
  name, data = panel.data_config(f'holdout:{folder}')
  assert name == 'toy (held out)' and data.kind == 'libsvm' and data.validation_fraction == 0.0
  whole = load_splits(panel.data_config(str(folder))[1])[0]
  train, _, test = load_splits(data)
  assert (train.num_images, test.num_images) == (400, 100)  # (the test file never read)
  rows = lambda ds: {(tuple(ds.features(i)[0]), tuple(ds.labels(i))) for i in range(ds.num_images)}
  assert rows(train) | rows(test) == rows(whole) and not rows(train) & rows(test)
  again = panel.data_config(f'holdout:{folder}')[1]  # (written once: read again the same)
  assert rows(load_splits(again)[2]) == rows(test)


def test_data_agnostic_config_follows_the_data(tmp_path):
  """K = min(Y − 1, 100) (the exact rank where that is every negative), Q = ⌈mean positives⌉ + 1, B the power of two
  nearest rows/6 within [128, 1024]; loading the config reads no data."""
  config = config_lib.load(f'configs/wsabie_mulan.py:{_mulan_folder(tmp_path)}')
  assert (config.train.batch_size, config.loss.num_draws) == ('auto', 'auto')
  train, _, _ = load_splits(config.data)  # Corel5k: Y = 374, 3.5 positives an image, at most 5
  fitted, values = fitting.resolve(config, train)
  assert values == {'loss.num_draws': 100, 'loss.kind': 'warp', 'loss.draws': 'per_row',
                    'loss.violators': 'first', 'loss.rank_estimate': 'first_violator',
                    'optim.learning_rate': 0.01,
                    'train.positives_per_row': 5,  # a row an image
                    'train.batch_size': 512,  # the split's 4,050 rows / 6 = 675 → 512
                    # 500 features × 374 labels: small; 4,050 images × those: cheap,
                    # and few enough for the kernel member (4,050 × 2,048 landmarks × 374)
                    'model.ensemble': 'one_vs_rest+logistic+svm+kernel',
                    'model.neighbours': 30,  # (4,050 training images: within 301-65,536)
                    'data.standardize': 'none'}  # (1.6% of the features an image: sparse)
  assert config.train.batch_size == 'auto'  # (a copy is fitted)
  rules = lambda **knobs: fitting.Rules(**knobs)
  # The rows are the split's, not scaled again by the validation fraction
  # (4,050 / 5.5 = 736 → 1024, where 90% of them would give 662 → 512).
  assert fitting.resolve(config, train, rules(steps_per_epoch=5.5))[0].train.batch_size == 1024
  few = fitting.resolve(config, train, rules(steps_per_epoch=10_000, max_draws=1000))[0]
  # K would draw every negative: the exact rank instead, at its own rate.
  assert (few.train.batch_size, few.loss.num_draws) == (128, 373)
  assert (few.loss.kind, few.optim.learning_rate) == ('exact', fitting.Rules.exact_learning_rate)
  drawn = fitting.resolve(config, train, rules(max_draws=1000, exact_ranks=False))[0]
  assert (drawn.loss.kind, drawn.optim.learning_rate) == ('warp', 0.01)
  assert fitting.resolve(config, train, rules(steps_per_epoch=10_000, min_batch=16))[0] \
      .train.batch_size == 16
  assert fitting.resolve(config, train, rules(steps_per_epoch=1))[0].train.batch_size == 1024
  # Rows enough for B at its ceiling (≥ 6·max_batch: 4,050 ≥ 3,072) take the
  # larger rate and their own K; the exact rank keeps its own rate and all of Y.
  big = fitting.resolve(config, train, rules(max_batch=512))[0]
  assert (big.train.batch_size, big.optim.learning_rate, big.loss.num_draws) == (
      512, fitting.Rules.large_learning_rate, fitting.Rules.large_max_draws)
  assert fitting.Rules.large_learning_rate > fitting.Rules.learning_rate
  assert fitting.resolve(config, train, rules(max_batch=512, large_max_draws=25))[0] \
      .loss.num_draws == 25
  big_exact = fitting.resolve(config, train, rules(max_batch=512, max_draws=1000,
                                                   large_max_draws=25))[0]
  assert (big_exact.loss.kind, big_exact.loss.num_draws) == ('exact', 373)
  assert fitting.resolve(config, train, rules(max_batch=1024))[0].optim.learning_rate == 0.01
  # Labels too many to read whole at K (Y 374 > 24·(10 + Q 5)): the batch's rows
  # share K = batch_max_draws draws instead, in batches of about rows / 24
  # (4,050 / 24 = 169 → 128); per row when told not to.
  shared = fitting.resolve(config, train, rules(max_draws=10))[0]
  assert (shared.loss.draws, shared.loss.num_draws, shared.train.batch_size) == (
      'per_batch', fitting.Rules.batch_max_draws, 128)
  assert fitting.resolve(config, train, rules(max_draws=10, batch_draws=False))[0].loss \
      .to_dict().items() >= {'draws': 'per_row', 'num_draws': 10}.items()
  # Alg. 1's first violator only where a row's own draws serve few positives
  # (Q 5 here); more positives a row, or draws shared by the batch: every violator.
  # Many positives on labels read whole (374 ≤ 24·(100 + 5)): the exact rank,
  # at the draws' rate; on labels gathered (374 > 24·(10 + 5)): shared draws.
  counted = ('all', 'violator_count')
  many = fitting.resolve(config, train, rules(first_violator_max_positives=4))[0]
  assert (many.loss.kind, many.optim.learning_rate) == ('exact', fitting.Rules.learning_rate)
  assert (many.loss.violators, many.loss.rank_estimate) == counted
  many_gathered = fitting.resolve(config, train, rules(first_violator_max_positives=4,
                                                       max_draws=10))[0]
  assert (many_gathered.loss.kind, many_gathered.loss.draws) == ('warp', 'per_batch')
  assert (many_gathered.loss.violators, many_gathered.loss.rank_estimate) == counted
  assert (shared.loss.violators, shared.loss.rank_estimate) == counted
  assert (few.loss.violators, few.loss.rank_estimate) == counted  # (exact: every label scored)
  # The adaptive sampler needs draws, weighted by importance: never the exact rank.
  adaptive = config_lib.load(f'configs/wsabie_mulan.py:{tmp_path / "toy"}')
  adaptive.loss.sampler = 'adaptive'
  for knobs in ({}, {'first_violator_max_positives': 4}, {'max_draws': 1000}):
    got = fitting.resolve(adaptive, train, rules(**knobs))[0].loss
    assert (got.kind, got.violators, got.rank_estimate) == ('warp',) + counted, knobs
  given = config_lib.load(f'configs/wsabie_mulan.py:{tmp_path / "toy"}')
  with given.ignore_type():
    given.train.batch_size = 64  # a value the user gives is kept
  assert fitting.resolve(given, train)[1].keys() == values.keys() - {'train.batch_size'}


def _cell(row: dict, *systems: dict) -> list[dict]:
  """One set × budget's rows: ours, LightFM max_sampled 10 and 7, each over `row`."""
  names = ('wsabie_jax', 'LightFM max_sampled=10', 'LightFM max_sampled=7')
  return [{**row, 'system': name, **fields} for name, fields in zip(names, systems)]


def test_ratio_table():
  row = {'set': 's', 'budget': 10.0, 'dim': 128, 'p@5': 0.1, 'map': 0.2, 'epochs': 1.0}
  rows = _cell(row, {'p@1': 0.6, 'pairs_per_sec': 50.0}, {'p@1': 0.5, 'pairs_per_sec': 100.0},
               {'p@1': 0.4, 'pairs_per_sec': 10.0})
  text = panel_table.table(rows, reach.REACH_AT, reach.REACH_WITHIN)
  assert '| s | 10 s | wsabie_jax | 128 | 0.600 | 0.100 | 0.200 | 50 | 1.0 |' in text
  assert '| s | 10 s | 1.20 | 0.50 |' in text
  reached = ([{**r, 'set': 'a', 'target_p1': 0.5, 'seconds_to_target': 3.0} for r in rows]
             + [{**r, 'set': 'b', 'target_p1': 0.9, 'seconds_to_target': None} for r in rows])
  text = panel_table.table(reached, reach.REACH_AT, reach.REACH_WITHIN)
  assert '| a | 0.500 | 3.0 s |' in text and '| b | 0.900 | > 30 s |' in text


def test_seeded_rows_give_the_gap_in_standard_errors():
  row = {'set': 's', 'budget': 60.0, 'dim': 8, 'p@5': 0.1, 'map': 0.2, 'epochs': 1.0,
         'pairs_per_sec': 10.0}
  rows = _cell(row, {'p@1': 0.70, 'p@1_sem': 0.003}, {'p@1': 0.72, 'p@1_sem': 0.004},
               {'p@1': 0.60, 'p@1_sem': 0.001})
  text = panel_table.table(rows, reach.REACH_AT, reach.REACH_WITHIN)
  # −0.020 over √(0.003² + 0.004²) = 0.005: four standard errors, against the better LightFM
  assert '| s | 60 s | 0.97 | 1.00 | -0.020 (-4.0) |' in text
  assert '| s | 60 s | wsabie_jax | 8 | 0.700 ± 0.003 |' in text


def test_overrides_read_literals_and_name_a_bad_one(tmp_path):
  got = args.parse_overrides(['train.select_metric=p@1', 'model.dim=64', 'model.max_norm=inf'])
  assert got == {'train.select_metric': 'p@1', 'model.dim': 64, 'model.max_norm': float('inf')}
  with pytest.raises(ValueError, match="'dim=64': expected SECTION.KEY=VALUE"):
    args.parse_overrides(['dim=64'])
  _, data = panel.data_config(str(_mulan_folder(tmp_path)))
  train = load_splits(data)[0]
  _, _, config = panel.ours_settings(panel.DEFAULT_CONFIG, data, train, got)
  assert (config.train.select_metric, config.model.dim) == ('p@1', 64)


def test_repeated_runs_give_the_first_runs_figures_and_the_median_speed():
  run = {'p@5': 0.2, 'map': 0.3, 'steps': 100, 'epochs': 2.0, 'stopped': 'early_stopping'}
  got = [{**run, 'p@1': p, 'train_examples_per_sec': v, 'train_seconds': t}
         for p, v, t in ((0.5, 300.0, 1.5), (0.6, 480.0, 1.1), (0.5, 450.0, 1.2))]
  row = panel._median_run(got)
  assert (row['pairs_per_sec'], row['p@1'], row['seconds']) == (450.0, 0.5, 1.5)
  assert row['pairs_per_sec_runs'] == [300.0, 480.0, 450.0] and row['p@1_runs'] == [0.5, 0.6, 0.5]
  assert row['p@1_sem'] is None
  two = panel._median_run(got, seeds=2)  # the first two runs are two seeds: their mean
  assert two['p@1'] == pytest.approx(0.55) and two['p@1_sem'] == pytest.approx(0.05)
  assert two['pairs_per_sec'] == 450.0
  assert two['ensemble_weight'] is None and two['wsabie_p@1'] is None  # (no member)
  member = [{**g, 'ensemble_weight': w, 'wsabie_p@1': a}
            for g, w, a in zip(got, (0.5, 1.0, 0.0), (0.4, 0.5, 0.9))]
  two = panel._median_run(member, seeds=2)  # WSABIE alone: the mean of the same seeds
  assert two['ensemble_weight'] == 0.5 and two['wsabie_p@1'] == pytest.approx(0.45)


def test_the_search_trains_each_candidate_on_each_set(tmp_path):
  """panel_search.choose (launch/benchmark.py --suite=panel_search) feeds timed.train_ours
  through the loop's dispatcher: one row a set and candidate, scored on its
  validation split (what is asserted does not depend on the machine's speed)."""
  folder = _mulan_folder(tmp_path, train_rows=1000)
  rows = panel_search.choose([str(folder)], [{'overrides': {'model.max_norm': 3.0}},
                                      {'knobs': {'max_draws': 10, 'batch_draws': False}},
                                      {'member': True, 'overrides': {
                                          f'model.{k}': v for k, v in helpers.QUICK_MEMBERS.items()}}],
                       budget=0.3)
  assert [(r['set'], r['candidate']) for r in rows] == [('toy', 0), ('toy', 1), ('toy', 2)]
  assert all(0.0 <= r['map'] <= 1.0 and r['pairs_per_sec'] > 0 for r in rows)
  assert rows[1]['num_draws'] == 10
  # the config's members beside the kept state, at the member and weight a run would choose
  assert rows[2]['ensemble_weight'] in linear_member.WEIGHTS
  assert rows[2]['ensemble_member'] in ('none',) + linear_member.MEMBERS
  assert not any('params' in r for r in rows)


def test_the_search_sets_lightfm_beside_the_candidates(tmp_path, monkeypatch):
  """--panel_search_peer: LightFM at max_sampled 10 and Y on the same validation
  split, read at SELECTIONS even points of one run and kept at its best MAP (as
  a candidate is kept), listed after the candidates (a fake LightFM: the
  tests do not install it)."""
  calls = []

  def fake_lightfm(train, valid, dim, threads, budgets, max_sampled):
    calls.append((train.num_images, valid.num_images, dim, list(budgets), max_sampled))
    maps = [0.1] * len(budgets)
    maps[3] = 0.9  # the fourth read is the best on MAP, the last the best on p@1
    return [{'system': f'LightFM max_sampled={max_sampled}', 'budget': b, 'p@1': 0.2 + i / 100,
             'p@5': 0.1, 'map': m, 'pairs_per_sec': 100.0 * max_sampled}
            for i, (b, m) in enumerate(zip(budgets, maps))]

  monkeypatch.setattr(panel, 'lightfm_reads', fake_lightfm)
  rows = panel_search.choose([str(_mulan_folder(tmp_path))], [{}], budget=0.3, peer=True)
  assert [r['candidate'] for r in rows] == [0, 'LightFM max_sampled=10',
                                            'LightFM max_sampled=374']
  assert [c[4] for c in calls] == [10, 374]
  reads = calls[0][3]
  assert len(reads) == panel_search.SELECTIONS and reads[-1] == pytest.approx(0.3)
  assert calls[0][2] == 128 and calls[0][0] + calls[0][1] == 4500  # the config's D; its split
  assert [r['p@1'] for r in rows[1:]] == [pytest.approx(0.23)] * 2  # kept on MAP
  assert rows[2]['pairs_per_sec'] == 37400.0


def test_every_search_candidate_builds_a_step(tmp_path):
  """Each candidate of each panel_search.SEARCH round (--suite=panel_search
  --panel_round=N) names real fitting knobs and config fields: it resolves to
  a step config on a set, as `choose` resolves it before training."""
  name, data = panel.data_config(str(_mulan_folder(tmp_path)))
  data.validation_fraction = 0.2
  train = load_splits(data)[0]
  for round_, candidates in panel_search.SEARCH.items():
    for cand in candidates:
      cfg, batch_size, config = panel.ours_settings(panel.DEFAULT_CONFIG, data, train,
                                                    cand.get('overrides'),
                                                    **cand.get('knobs', {}))
      for path, value in cand.get('overrides', {}).items():
        section, key = path.split('.')
        assert config[section][key] == value, (round_, cand)
      assert batch_size > 0 and cfg.loss.num_draws >= 1, (round_, cand)


def test_seconds_to_a_p1_stops_when_reached(tmp_path):
  """reach.seconds_to: the seconds of steps to a test p@1; training ends once
  it is reached (a target of 0 at the first scoring), None where it is not
  (above 1). The time asserted is the budget's bound, not the machine's speed."""
  name, data = panel.data_config(str(_mulan_folder(tmp_path, train_rows=1000)))
  data.validation_fraction = 0.1
  cfg, _, config = panel.ours_settings(panel.DEFAULT_CONFIG, data, load_splits(data)[0])
  padded = batching.pad_images(load_splits(config.data)[2])
  config.model.ensemble = 'none'
  # (scored on the fine grid from its first step, 0.1 s, not the coarse one's 4 s)
  assert 0 < reach.seconds_to(cfg, config, padded, 0.0, within=5.0, every=4.0,
                              fine_until=3.2) < 5.0
  assert reach.seconds_to(cfg, config, padded, 1.01, within=0.2, every=0.05) is None
  # With the members their training seconds (a fake clock's 3 and 4) come first.
  config.model.ensemble = 'one_vs_rest+logistic'
  config.model.update(helpers.QUICK_MEMBERS)
  clock = lambda: next(ticks)
  ticks = iter([100.0, 103.0, 103.0, 107.0])
  got = reach.seconds_to(cfg, config, padded, 0.0, within=5.0, every=0.05, clock=clock)
  assert 7.0 < got < 12.0
  # A run of budget B trains the members ensemble_at(B) names: under 4 s
  # none, under 10 s One-vs-Rest (3 s), then both (7 s). The first pause's
  # run: none (its steps alone, under 4 s); …
  ladder = lambda budget: ('none' if 0 < budget < 4 else 'one_vs_rest' if 0 < budget < 10
                           else 'one_vs_rest+logistic')  # (0: no budget, every member)
  ticks = iter([100.0, 103.0, 103.0, 107.0])
  assert 0 < reach.seconds_to(cfg, config, padded, 0.0, within=5.0, every=0.05, clock=clock,
                              ensemble_at=ladder) < 4.0
  # Scored first after 1 s of steps, under a ladder of none to 0.5 s,
  # One-vs-Rest to 3.5 s, both after: that run's One-vs-Rest would make its
  # budget 4 s, which trains both, 8 s: the least P with
  # ensemble_at(steps + P's seconds) = P.
  ticks = iter([100.0, 103.0, 103.0, 107.0])
  ladder = lambda budget: ('none' if 0 < budget < 0.5 else 'one_vs_rest' if 0 < budget < 3.5
                           else 'one_vs_rest+logistic')
  got = reach.seconds_to(cfg, config, padded, 0.0, within=5.0, every=1.0, clock=clock,
                         ensemble_at=ladder)
  assert 8.0 <= got < 12.0  # (the pause lands after a call: its overshoot is the machine's pace)


def test_reach_is_scored_finely_within_twice_the_peers_time():
  """reach.pause_times: REACH_FINE scorings up to twice the peer's seconds
  (no finer than REACH_FINEST), then one every REACH_EVERY; none fine
  without a peer's time (the old 1-s grid)."""
  def times(after, until):
    got, t = [], 0.0
    while (t := after(t)) <= until:
      got.append(round(t, 6))
    return got
  fine = times(reach.pause_times(1.0, fine_until=6.4), 8.5)
  assert fine == [round(0.2 * i, 6) for i in range(1, 33)] + [7.4, 8.4]
  assert times(reach.pause_times(1.0, fine_until=0.2), 2.7)[:20] == [
      round(0.01 * i, 6) for i in range(1, 21)]
  assert times(reach.pause_times(1.0, fine_until=0.2), 2.7)[20:] == [1.2, 2.2]
  assert times(reach.pause_times(1.0), 3.5) == [1.0, 2.0, 3.0]


@pytest.mark.slow  # the profile benchmark end to end: a trace and the kernel's A/B compiled
def test_step_profile_ranks_the_kernels(tmp_path):
  """launch/benchmark.py --suite=profile: the step's multiply-adds a second and
  XLA's kernels from a profiler trace, each named with the op it computes."""
  from wsabie_jax.benchmarks import step_profile
  with helpers.optimized():  # the kernels a user's run has
    fresh, trained = step_profile.run([str(_mulan_folder(tmp_path))], seconds=0.1,
                                      trained_steps=32, ab_rounds=2)
  assert (fresh['phase'], trained['phase']) == ('fresh', 'trained')
  assert 0 <= trained['violator_rate'] <= 1
  for row in (fresh, trained):
    assert row['madds_per_sec'] > 0 and row['matmul_madds_per_sec'] > 0
    assert row['kernels'] and all(k['ms'] >= 0 for k in row['kernels'])
    assert any(k['op'] for k in row['kernels'])
    ab = row['native_vs_xla']  # the native row kernel's A/B, where it is built
    assert (ab is None) == (not native_rows.available())
    if ab is not None:
      assert ab['xla_ms'] > 0 and ab['native_ms'] > 0
      assert ab['ratio_iqr'][0] <= ab['ratio'] <= ab['ratio_iqr'][1]
    sums = row['slices_vs_reduction']  # core/lane_sums.py's A/B
    assert sums['slices_ms'] > 0 and sums['reduction_ms'] > 0
    assert sums['ratio_iqr'][0] <= sums['ratio'] <= sums['ratio_iqr'][1]


def test_the_profiles_off_arm_is_traced_under_its_switch(monkeypatch):
  """gather_vs_whole.scanned_call hands every measurement of a config one
  jitted call; step_profile.paired's 'off' arm must not be handed it, or jit
  would run the program traced without the switch and the A/B read 1."""
  import contextlib
  from wsabie_jax.benchmarks import gather_vs_whole, step_profile
  from wsabie_jax.data import synthetic
  from wsabie_jax.wsabie import step as step_lib
  spec = synthetic.SyntheticSpec(num_labels=30, num_features=50, nnz=5)
  stream = batching.PairStream(synthetic.generate(spec, 64), 8, 0)
  cfg = helpers.step_config(30, dim=4, num_draws=5)
  switched, traced = [False], []

  @contextlib.contextmanager
  def turned_off():
    switched[0] = True
    try:
      yield
    finally:
      switched[0] = False

  step = step_lib.train_step

  def recorded(*args):  # a trace of the step notes whether the switch is on
    traced.append(switched[0])
    return step(*args)

  monkeypatch.setattr(step_lib, 'train_step', recorded)
  call, state, batches = gather_vs_whole.scanned_call(cfg, stream, 50)
  call(state, batches)  # the config's call, traced and compiled outside the switch
  ab = step_profile.paired(cfg, stream, 50, None, 1, turned_off)
  assert True in traced and ab['on_ms'] > 0 and ab['off_ms'] > 0
  assert gather_vs_whole.scanned_call(cfg, stream, 50)[0] is call  # (the 'on' arm's: one call)


def test_each_kernel_is_named_by_its_line_of_the_compiled_program():
  """step_profile._ops_of (one pass over XLA's text) gives each instruction the
  op and shape a search of the text for its line gives (the slow reference)."""
  from wsabie_jax.benchmarks import step_profile

  def op_of(hlo, name):  # the line `%name = …` or `ROOT %name = …`, searched for
    for line in hlo.splitlines():
      if line.lstrip().startswith((f'%{name} = ', f'ROOT %{name} = ')):
        op = line.split('op_name="', 1)[1].split('"', 1)[0].split('/')[-1] \
            if 'op_name="' in line else ''
        return f'{op} {line.split("= ", 1)[1].split(" ", 1)[0]}'

  f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(axis=0) + jnp.cumsum(b[0]))
  hlo = f.lower(jnp.ones((8, 4)), jnp.ones((4, 16))).compile().as_text()
  ops = step_profile._ops_of(hlo)
  assert len(ops) > 3 and any(op.startswith('dot_general f32[8,16]') for op in ops.values()), ops
  for name, op in ops.items():
    assert op == op_of(hlo, name), (name, op)


def test_ours_repeats_a_short_run_at_any_budget(monkeypatch):
  """A run stopped on patience after seconds is as noisy at 300 s as at 10 s:
  it runs panel.RUNS times, pairs/s their median; one that lasts ONE_RUN_FROM
  seconds or more runs once."""
  lasts = iter([2.0, 2.0, 2.0, 120.0])  # the 300-s budget's runs, then the 600-s one's
  rates = iter([100.0, 300.0, 200.0, 50.0])

  def fake_run(config, workdir):
    return {'train_seconds': next(lasts), 'train_examples_per_sec': next(rates), 'p@1': 0.5,
            'p@5': 0.2, 'map': 0.4, 'epochs': 3.0, 'stopped': 'early_stopping'}

  monkeypatch.setattr(panel.run, 'train_and_evaluate', fake_run)
  config = ml_collections.ConfigDict({'train': {'max_seconds': 0.0, 'max_steps': 0},
                                  'model': {'dim': 8}})
  short, long = panel._ours(config, budgets=(300.0, 600.0))
  assert short['pairs_per_sec_runs'] == [100.0, 300.0, 200.0] and short['pairs_per_sec'] == 200.0
  assert long['pairs_per_sec_runs'] == [50.0]


def test_seeds_vary_every_random_choice_of_both_systems(monkeypatch):
  """--panel_seeds=N: ours' run i has seed and split seed i mod N (a long
  run still runs N times), LightFM one run a seed; each budget's figures are
  the seeds' mean."""
  seen = []

  def fake_run(config, workdir):
    seen.append((config.seed, config.data.split_seed))
    return {'train_seconds': 120.0, 'train_examples_per_sec': 1.0, 'p@1': 0.5 + config.seed / 10,
            'p@5': 0.2, 'map': 0.4, 'epochs': 3.0, 'stopped': 'early_stopping'}

  monkeypatch.setattr(panel.run, 'train_and_evaluate', fake_run)
  config = ml_collections.ConfigDict({'seed': 0, 'data': {'split_seed': 0},
                                      'train': {'max_seconds': 0.0, 'max_steps': 0},
                                      'model': {'dim': 8}})
  (row,) = panel._ours(config, budgets=(60.0,), seeds=3)
  assert seen == [(0, 0), (1, 1), (2, 2)] and config.seed == 0  # the caller's config unchanged
  assert row['p@1'] == pytest.approx(0.6) and row['p@1_sem'] == pytest.approx(0.1 / 3 ** 0.5)

  states = []

  def fake_lightfm(train, test, dim, threads, budgets, max_sampled, seed=0):
    states.append(seed)
    return [{'system': f'LightFM max_sampled={max_sampled}', 'budget': b, 'dim': dim,
             'seconds': b, 'epochs': 1.0, 'pairs_per_sec': 10.0 * (seed + 1), 'p@1': 0.7 + seed / 10,
             'p@5': 0.3, 'map': 0.5} for b in budgets]

  monkeypatch.setattr(panel, 'lightfm_reads', fake_lightfm)
  ten, sixty = panel._lightfm_seeds(None, None, 8, 2, (10.0, 60.0), 10, seeds=2)
  assert states == [0, 1] and (ten['budget'], sixty['budget']) == (10.0, 60.0)
  assert sixty['p@1'] == pytest.approx(0.75) and sixty['p@1_runs'] == pytest.approx([0.7, 0.8])
  assert sixty['pairs_per_sec'] == pytest.approx(15.0) and sixty['p@1_sem'] == pytest.approx(0.05)


def test_the_verdict_against_a_peer_is_read_in_test_file_standard_errors():
  """ahead: at or above the peer's p@1; level: within one standard error of a
  p@1 on this test file, √(p(1−p)/n), below it; behind: further below."""
  se = (0.9 * 0.1 / 1000) ** 0.5  # 0.0095
  assert peers.verdict(0.9, 0.9, 1000) == 'ahead'
  assert peers.verdict(0.95, 0.9, 1000) == 'ahead'
  assert peers.verdict(0.9 - 0.99 * se, 0.9, 1000) == 'level'
  assert peers.verdict(0.9 - 1.01 * se, 0.9, 1000) == 'behind'


def test_the_peer_table_names_the_best_peer_and_the_reach():
  best = {'peer': 'omikuji_bonsai', 'weighting': 'raw', 'p@1': 0.915, 'p@3': 0.618,
          'p@5': 0.459, 'train_seconds': 7.9}
  rows = [{'set': 'debtags', 'budget': 60.0, 'system': 'wsabie_jax', 'dim': 128, 'p@1': 0.899,
           'p@5': 0.454, 'map': 0.834, 'pairs_per_sec': 1.0, 'epochs': 1.0, 'best_peer': best,
           'test_images': 6358, 'seconds_to_best_peer': None},
          {**best, 'set': 'corel5k', 'budget': 60.0, 'system': 'wsabie_jax', 'dim': 128,
           'p@1': 0.92, 'map': 0.3, 'pairs_per_sec': 1.0, 'epochs': 1.0, 'best_peer': best,
           'test_images': 500, 'seconds_to_best_peer': 3.0}]
  lines = peers.table(rows, reach.REACH_WITHIN).splitlines()
  assert lines[2] == ('| debtags | 60 s | 0.899 | 0.454 | omikuji_bonsai (raw) | '
                      '0.915 / 0.618 / 0.459 | 7.90 | behind | not within 30 s |')
  assert lines[3].endswith('| 7.90 | ahead | 3.00 s, within |')
  rows[1].update(seconds_to_best_peer=7.91)
  assert peers.table(rows, reach.REACH_WITHIN).splitlines()[3].endswith('| 7.91 s, over |')
  best['p@1_sem'] = 0.0012  # (the peer's mean over seeds: its standard error beside it)
  debtags = peers.table(rows, reach.REACH_WITHIN).splitlines()[2]
  assert '| 0.915 ± 0.001 / 0.618 / 0.459 |' in debtags


def test_the_panels_seeds_reach_the_peers(tmp_path, monkeypatch):
  """--panel_seeds=N runs each peer at N seeds too (panel.versus_peers hands
  them to peers.run), so the bar is a mean over seeds, as ours' cells are."""
  from tests.peers_test import _easy
  from wsabie_jax.data.libsvm import write_libsvm
  write_libsvm(_easy(40), tmp_path / 'train.txt')
  write_libsvm(_easy(20, seed=1), tmp_path / 'test.txt')
  asked = []
  monkeypatch.setattr(peers, 'run', lambda *args, seeds=1, **kw: asked.append(seeds) or [])
  _, data = panel.data_config(f'libsvm:{tmp_path}/train.txt:{tmp_path}/test.txt')
  assert panel.versus_peers(data, None, None, None, threads=1, seeds=3) == {'peers': []}
  assert asked == [3]


def test_the_folds_score_every_training_example_once_and_never_read_the_test_file(
    tmp_path, capsys, monkeypatch):
  """launch/benchmark.py --suite=folds: the training file in folds, the config
  and the changed config each run through the loop on the other folds; the
  pooled figures count every training example once; the test file (absent
  here) is not read; only the changed runs refit. With peers (a fake pair of
  them here, each fold's p@1 its own), the best one's p@1 is pooled by the
  folds' sizes too; the members' and the neighbours' grids, and each member
  alone, are scored beside."""
  from wsabie_jax.benchmarks import folds
  sizes = []

  def fake_peers(train, fold, log):
    sizes.append((train.num_images, fold.num_images))
    k = len(sizes)
    return [{'peer': 'steady', 'weighting': 'raw', 'p@1': 0.4 + 0.2 * (k == 2)},   # pools 0.5
            {'peer': 'varies', 'weighting': 'tfidf', 'p@1': 0.1 + 0.7 * (k == 2)}]  # 0.45
  monkeypatch.setattr(folds.peers_lib, 'run', fake_peers)
  # (each fold's run chooses its member on its validation split: the choice
  # on folds of its own is tests/fold_choice_test.py's, five more runs a fold)
  monkeypatch.setattr(fold_choice, 'MAX_IMAGES', 0)
  rng = np.random.default_rng(0)
  lines = ['90 12 3']
  for _ in range(90):
    label = int(rng.integers(3))
    feats = sorted({label * 4 + int(j) for j in rng.integers(0, 4, 2)} | {int(rng.integers(12))})
    lines.append(f'{label} ' + ' '.join(f'{j}:1' for j in feats))
  (tmp_path / 'train.txt').write_text('\n'.join(lines) + '\n')
  rows = folds.compare([f'libsvm:{tmp_path}/train.txt:{tmp_path}/absent.txt'],
                       {'train.refit': True, 'train.patience': 1, 'train.plateau_drops': 0},
                       budget=0.0, folds=2, peers=True, choice=True, neighbour_grid=True,
                       members=True)
  (row,) = rows
  assert row['config']['examples'] == row['changed']['examples'] == 90
  assert sizes == [(45, 45), (45, 45)]
  assert row['best_peer'] == {'name': 'steady (raw)', 'p@1': pytest.approx(0.5)}
  assert row['config']['refit_steps'] == 0 and row['changed']['refit_steps'] > 0
  assert 0 < row['config']['p@1'] <= 1 and 0 < row['changed']['map'] <= 1
  out = capsys.readouterr().out
  assert 'train.refit=True' in out and 'best peer on the same folds: steady (raw) 0.5000' in out
  # (choice: the config's members beside its model, a pair a fold chosen on the other fold)
  assert len(row['choice']['picks']) == 2 and 0 < row['choice']['p@1'] <= 1
  assert 0 < row['choice']['best_fixed']['p@1'] <= 1
  assert "chosen on the other folds' MAP" in out
  # (neighbour_grid: every cell beside the run's own model, which it scores as the run did)
  cells = row['neighbours']['cells']
  assert len(cells) == 1 + np.prod([len(axis) for axis in folds.NEIGHBOUR_GRID])
  assert cells['k 0 power 0 μ 0']['p@1'] == pytest.approx(row['config']['p@1'])
  assert len(row['neighbours']['chosen']['picks']) == 2 and "the neighbours' votes" in out
  # (members: each alone, pooled over both folds, with its seconds)
  # (the run's own members, 'auto''s on 45 images, and the ridge one, in MEMBERS' order)
  assert list(row['members']) == [k for k in linear_member.MEMBERS if k in row['members']]
  assert {'one_vs_rest', 'ridge'} <= set(row['members'])
  assert all(0 < m['p@1'] <= 1 and 0 < m['map'] <= 1 and m['seconds'] > 0
             for m in row['members'].values())
  assert 'each member alone' in out


def test_a_folds_member_and_weight_is_chosen_on_the_other_folds():
  """--folds_choice's rule: each fold takes the pair best on the other
  folds' MAP pooled by their sizes (never its own), equals to the first."""
  from wsabie_jax.benchmarks import folds
  grid = lambda alone, svm: {(None, 0.0): {'map': alone}, ('svm', 4.0): {'map': svm}}
  grids = [grid(0.5, 0.9), grid(0.6, 0.5), grid(0.7, 0.6)]
  # Pooled by size over the other folds: fold 0 sees folds 1 (×1) and 2 (×3), alone
  # 0.6 + 2.1 = 2.7 against svm 0.5 + 1.8 = 2.3; fold 1 sees 0 and 2, alone 2.6 against
  # svm 2.7; fold 2 sees 0 and 1, alone 1.1 against svm 1.4.
  assert folds.chosen_on_other_folds(grids, [1, 1, 3]) == [(None, 0.0), ('svm', 4.0),
                                                           ('svm', 4.0)]
  assert folds.chosen_on_other_folds([grid(0.5, 0.5), grid(0.5, 0.5)], [1, 1]) == [(None, 0.0)] * 2
  # With no override the config runs alone, and its table has the one column
  row = {'set': 'medical', 'config': {'examples': 333, 'p@1': 0.8, 'map': 0.85, 'refit_steps': 9.0},
         'choice': {'p@1': 0.82, 'map': 0.86, 'picks': ['svm 4', 'alone 0'],
                    'best_fixed': {'pair': 'svm 4', 'p@1': 0.83}}}
  text = folds.table([row], {}, 60.0, 5)
  assert '(no override)' in text and '0.8200 / 0.8600 against' in text and 'svm 4, alone 0' in text
  assert 'best one pair on every fold: svm 4 0.8300' in text

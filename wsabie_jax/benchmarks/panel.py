"""The panel side by side (launch/benchmark.py --suite=panel): on each data
set, this project with one config file for every set (--panel_config: by
default configs/wsabie_mulan.py, whose settings follow the data) against
LightFM's WARP with max_sampled = 10 (its default) and = Y at the config's D
on that set, 2 threads each: test p@1, p@5, MAP, pairs/s and epochs at each
budget.

LightFM runs once per set, as long as the largest budget: the smaller
budgets are read off it (training paused, the test scored off the clock,
then resumed; its schedule does not depend on the budget). Ours runs as a
user runs it: the config file with a 10% validation split choosing the best
checkpoint and `train.max_seconds` set to the budget, one run per budget
(its validation interval fits the budget: train.evals_per_budget), so
compilation and validation count against it; a budget whose first run
lasts under 60 s runs three times, pairs/s their median (`_ours`). Then the seconds of steps ours takes
to reach the better LightFM's 60-s test p@1 (benchmarks/reach.py). A set costs
about 13 minutes at 10, 60 and 300 s on 2 cores (LightFM's two 300-s runs
are most of it); 2 minutes without the 300.

With `seeds` > 1 (--panel_seeds) both systems run that many times with
their seeds moved, and each cell is the mean with p@1's standard error:
one run each reads a cell at parity as a coin flip.

A set is 'corel5k' (shipped), a folder of Mulan files (NAME-train.arff,
NAME-test.arff, NAME.xml, as Mulan distributes them), a libsvm pair
'libsvm:TRAIN:TEST', or a stand-in 'standin:NAME' (benchmarks/standins.py);
'holdout:SET' is SET's training file alone, a fifth of it held out as the
test file (`held_out`): a change tuned on it never reads SET's test file.
"""
from __future__ import annotations

import importlib.util
import pathlib
import tempfile
import time

import ml_collections
import numpy as np

from wsabie_jax import config as config_lib
from wsabie_jax.data import settings as data_settings
from wsabie_jax.core import evaluation, user_cache
from wsabie_jax.data import batching, load_splits, read_split
from wsabie_jax.benchmarks import panel_table, peers, reach, standins, timed
from wsabie_jax.api import fold_choice, run
from wsabie_jax.methods import wsabie as wsabie_method
from wsabie_jax.wsabie import fitting

KS = reach.KS
VALID_FRACTION = 0.1  # ours: carved from the training file to choose the checkpoint
DEFAULT_CONFIG = 'configs/wsabie_mulan.py'


# What a config file does to the features, kept when the panel gives it other data.
FEATURE_KEYS = fold_choice.FEATURE_KEYS


def data_config(spec: str):
  """(name, config.data) of a panel entry, with no validation split (both
  systems train on the whole training file)."""
  if spec.startswith('holdout:'):
    name, data = data_config(spec.split(':', 1)[1])
    folder = held_out(name, data)
    return f'{name} (held out)', data_config(f'libsvm:{folder}/train.txt:{folder}/test.txt')[1]
  if spec == 'corel5k':
    from wsabie_jax.data import corel5k_paths
    train, test, labels = corel5k_paths()
    name, data = 'corel5k', data_settings.file_data('mulan', train, test, labels)
  elif spec.startswith('standin:'):
    name = spec.split(':', 1)[1]
    folder = standins.folder(name)
    data = data_settings.file_data('libsvm', str(folder / 'train.txt'), str(folder / 'test.txt'))
  elif spec.startswith('libsvm:'):
    _, train, test = spec.split(':')
    data = data_settings.file_data('libsvm', train, test)
    # (a folder's train.txt is named by its folder: ../debtags/train.txt is 'debtags')
    name = pathlib.Path(train).parent.name if pathlib.Path(train).stem == 'train' else \
        pathlib.Path(train).stem
  else:
    data = data_settings.mulan_folder(spec)
    name = pathlib.Path(data.train_path).name[:-len('-train.arff')]
  data.validation_fraction = 0.0
  return name, data


HELD_OUT = 5  # holdout:SET tests on one in this many of SET's training examples


def held_out(name: str, data, root=None) -> pathlib.Path:
  """The folder holding train.txt and test.txt (libsvm) cut from `data`'s
  training file alone (a seeded permutation's first 1/HELD_OUT the test),
  written on first use under `root` (default $WSABIE_JAX_CACHE/holdout)."""
  out = pathlib.Path(root or user_cache.root() / 'holdout') / name
  if not (out / 'test.txt').exists():
    whole = read_split(data, data.train_path)  # (as the file holds it: the run normalises)
    order = np.random.default_rng(0).permutation(whole.num_images)
    fold_choice.write_fold(whole, order[:whole.num_images // HELD_OUT], out)
  return out


def on_data(config_path: str, data, overrides: dict | None = None) -> ml_collections.ConfigDict:
  """The config file with `data` as its data section (the file's feature
  treatment kept: FEATURE_KEYS) and `overrides` ({'model.dim': 64, …})
  applied; its 'auto' fields still unfitted."""
  config = config_lib.load(config_path)
  config.data = ml_collections.ConfigDict(
      {**data.to_dict(), **{k: config.data.get(k, data.get(k)) for k in FEATURE_KEYS}})
  for path, value in (overrides or {}).items():
    section, key = path.split('.')
    config[section][key] = value
  return config


def ours_settings(config_path: str, data, train, overrides: dict | None = None, **knobs):
  """(StepConfig, batch size, config): the config file with this data (its
  normalisation and bias feature kept), `overrides` ({'model.dim': 64, …})
  applied, then its 'auto' fields fitted to `train` (the split the run trains
  on) by wsabie/fitting.py's rules (`knobs` changes them), its draws capped
  at the Y − 1 negatives."""
  config = on_data(config_path, data, overrides)
  config, _ = fitting.resolve(config, train, fitting.Rules(**knobs))  # its 'auto' fields
  if config.loss.kind != 'exact':
    config.loss.num_draws = min(config.loss.num_draws, train.num_labels - 1)
  return wsabie_method.step_config(config, train.num_labels), config.train.batch_size, config


def ours_on(config_path: str, data, overrides: dict | None = None):
  """ours_settings on a panel set's `data` (data_config's), and its (train,
  test) splits whole. Ours holds out VALID_FRACTION to choose its checkpoint;
  `fit` sizes B and K from the rest, as a run of the config does; LightFM and
  the peers train on all of it."""
  valid_data = with_valid(data, VALID_FRACTION)
  cfg, batch_size, config = ours_settings(config_path, valid_data, load_splits(valid_data)[0],
                                          overrides)
  train, _, test = load_splits(with_valid(config.data, 0.0))
  return cfg, batch_size, config, (train, test)


def compare(specs, budgets=(10.0, 60.0, 300.0), dim: int | None = None, threads: int = 2,
            config_path: str = DEFAULT_CONFIG, runs: int = 3,
            overrides: dict | None = None, seeds: int = 1, with_peers: bool = True) -> dict:
  """Every set × budget × system; prints the table and returns its rows. Ours
  runs with the config file's D (and `overrides`: {'train.select_metric': 'p@1'});
  LightFM with the same D unless `dim` is given. `seeds` > 1: both systems
  run with seeds 0 … seeds − 1, each cell their mean test figures with p@1's
  standard error, so a gap can be read against the spread of both.
  `with_peers`: the extreme-classification libraries too (benchmarks/peers.py,
  those installed), each trained to completion on the set's raw and tf-idf
  features, at the same seeds; `peers.table` reads ours against the best of
  them."""
  budgets = sorted(budgets)
  rows = []
  for spec in specs:
    name, data = data_config(spec)
    cfg, batch_size, config, (train, test) = ours_on(config_path, data, overrides)
    stats = dict(set=name, labels=train.num_labels, train_images=train.num_images,
                 mean_nnz=float(np.diff(train.feat_indptr).mean()),
                 max_nnz=int(np.diff(train.feat_indptr).max()))
    print(f'\n{name}: {train.num_images:,} train / {test.num_images:,} test, Y={train.num_labels}, '
          f'd={train.num_features}, non-zeros mean {stats["mean_nnz"]:.0f} / max '
          f'{stats["max_nnz"]}; ours B={batch_size} K={cfg.loss.num_draws} D={cfg.model.dim}',
          flush=True)
    members_at = ensemble_at(config_path, data, overrides)
    snapshots = _ours(config, budgets, runs, seeds, members_at)
    if with_peers:
      stats.update(versus_peers(data, cfg, config, test, threads, seeds=seeds,
                                ensemble_at=members_at))
    lightfm_dim = dim or cfg.model.dim
    if importlib.util.find_spec('lightfm') is None:
      print('  LightFM: skipped (not installed; docs/RESULTS.md says how)', flush=True)
    else:
      for max_sampled in lightfm_settings(train.num_labels):
        snapshots += _lightfm_seeds(train, test, lightfm_dim, threads, budgets, max_sampled,
                                    seeds)
    if reach.REACH_AT in budgets and len(snapshots) > len(budgets):  # the seconds ours takes to reach the better LightFM's 60-s p@1
      target = max(s['p@1'] for s in snapshots
                   if s['system'] != 'wsabie_jax' and s['budget'] == reach.REACH_AT)
      stats.update(target_p1=target, seconds_to_target=reach.seconds_to(
          cfg, config, batching.pad_images(test), target, ensemble_at=members_at))
      print(f'  ours reached p@1 {target:.4f} (the better LightFM at {reach.REACH_AT:.0f} s) in '
            + (f'{stats["seconds_to_target"]:.1f} s' if stats['seconds_to_target'] is not None
               else f'more than {reach.REACH_WITHIN:.0f} s'), flush=True)
    for s in snapshots:
      rows.append({**stats, **s})
      member = ('' if s.get('ensemble_weight') is None
                else f'  member {s.get("ensemble_member") or "one_vs_rest"} at λ '
                f'{s["ensemble_weight"]:g} (WSABIE alone: '
                f'p@1 {s["wsabie_p@1"]:.4f})')
      if s.get('neighbours_weight') is not None:
        member += f', neighbours\' votes at μ {s["neighbours_weight"]:g}'
      print(f'  {s["budget"]:>4.0f} s  {s["system"]:<22} p@1 {panel_table.p1(s, 4)}  '
            f'p@5 {s["p@5"]:.4f}  MAP {s["map"]:.4f}  {s["pairs_per_sec"]:>9,.0f} pairs/s  '
            f'{s["epochs"]:6.1f} epochs'
            + member, flush=True)
  print(panel_table.table(rows, reach.REACH_AT, reach.REACH_WITHIN))
  if any('best_peer' in r for r in rows):
    print(peers.table(rows, reach.REACH_WITHIN))
  return {'rows': rows}


def versus_peers(data, cfg, config, test, threads: int, names=None, seeds: int = 1,
                 ensemble_at=None) -> dict:
  """{'peers': their rows, and where one ran, 'best_peer', 'test_images' and
  'seconds_to_best_peer'}: the extreme-classification libraries
  (benchmarks/peers.py; `names`, all by default) trained to completion with
  `threads` threads on the set's raw and tf-idf features (`data` as the file
  holds it), each row its mean over `seeds` seeds, then ours (`cfg`, `config`:
  ours_settings') trained towards the best one's test p@1 for twice its
  training time (reach.REACH_WITHIN at least), its members at each budget
  `ensemble_at`'s (reach.seconds_to)."""
  raw = load_splits(with_valid(ml_collections.ConfigDict(
      {**data.to_dict(), 'normalize': 'none', 'bias_feature': 0.0}), 0.0))
  found = {'peers': peers.run(raw[0], raw[2], threads, names, seeds=seeds)}
  best = peers.best(found['peers'])
  if best is not None:
    found.update(best_peer=best, test_images=test.num_images,
                 seconds_to_best_peer=reach.seconds_to(
                     cfg, config, batching.pad_images(test), best['p@1'],
                     within=max(reach.REACH_WITHIN, 2 * best['train_seconds']),
                     fine_until=2 * best['train_seconds'], ensemble_at=ensemble_at))
  return found


def ensemble_at(config_path: str, data, overrides: dict | None = None):
  """budget → model.ensemble as a run of the config on `data` (data_config's;
  ours' validation split carved) fits it with train.max_seconds = budget (0:
  none): 'auto' names fewer members under a minute (wsabie/linear_member.py `budget_share`)."""
  unfitted = on_data(config_path, with_valid(data, VALID_FRACTION), overrides)
  train = load_splits(unfitted.data)[0]

  def at(budget: float) -> str:
    config = ml_collections.ConfigDict(unfitted.to_dict())
    config.train.max_seconds = float(budget)
    return fitting.fitted(config, train).get('model.ensemble', config.model.ensemble)
  return at


def scored(params, padded) -> dict:
  got = evaluation.evaluate_params(params, padded, ks=KS)
  return {k: got[k] for k in ('p@1', 'p@5', 'map')}


def with_valid(data, fraction: float) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({**data.to_dict(), 'validation_fraction': fraction})


RUNS = 3  # ours runs each budget this many times: pairs/s their median (below) …
ONE_RUN_FROM = 60.0  # … unless its first run lasted this long (its pairs/s steady)


def _ours(config, budgets, runs: int = RUNS, seeds: int = 1, ensemble_at=None) -> list[dict]:
  """This project as a user runs it: the config on the set, its validation
  split choosing the best checkpoint, `train.max_seconds` = the budget
  (wall-clock: compilation and validations count), a separate run for each
  budget, tested on the best.

  Each budget runs `runs` times: most stop early after 0.3-8 s of steps, and
  on a shared 2-core machine one such run's pairs/s read 20-35% low in a
  panel now and then (medical: 304k and 379k against 450-490k for the same
  setting otherwise), which a 10 s or 60 s LightFM run averages away.
  `seeds` > 1 runs each budget at least that many times, run i with its
  seeds moved by i mod `seeds` (`_seeded`). The test figures are the mean
  of each seed's first run (one seed: the first run, as one run gives
  them), the pairs/s the median of every run (`_median_run`). `ensemble_at`:
  each budget's members as its run fits them (None: config.model.ensemble's)."""
  out = []
  for budget in budgets:
    config.train.update(max_seconds=float(budget), max_steps=0)  # (num_epochs as configured)
    if ensemble_at is not None:
      config.model.ensemble = ensemble_at(budget)
    got = []
    # (A run stopped on patience after a few seconds is as noisy at any budget.)
    while len(got) < seeds or (len(got) < runs and got[0]['train_seconds'] < ONE_RUN_FROM):
      with tempfile.TemporaryDirectory() as workdir:
        got.append(run.train_and_evaluate(_seeded(config, len(got) % seeds), workdir))
    out.append({'system': 'wsabie_jax', 'budget': budget, 'dim': config.model.dim,
                **_median_run(got, seeds)})
  return out


def _seeded(config, offset: int):
  """`config` with every random choice of a run moved by `offset`: the
  initialisation and the draws (config.seed) and the validation split
  (data.split_seed). Offset 0 is the config as a user runs it."""
  if not offset:
    return config
  config = config.copy_and_resolve_references()
  config.seed += offset
  config.data.split_seed += offset
  return config


def _median_run(got: list[dict], seeds: int = 1) -> dict:
  """One row for repeated runs of one setting: the mean test figures of the
  first `seeds` runs (one seed each; one seed: the first run's figures, what
  one run gives a user) with their standard error ('p@1_sem', seeds > 1),
  the first run's steps and epochs, the median pairs/s, and every run's
  pairs/s and p@1. The runs need not stop at the same step: the validation
  interval is fitted to the speed measured (train.evals_per_budget)."""
  first = got[0]
  return {'seconds': first['train_seconds'],
          'pairs_per_sec': float(np.median([g['train_examples_per_sec'] for g in got])),
          'pairs_per_sec_runs': [g['train_examples_per_sec'] for g in got],
          'p@1_runs': [g['p@1'] for g in got], 'epochs': first['epochs'],
          'stopped': first['stopped'], 'refit_steps': first.get('refit_steps', 0),
          'ensemble_weight': first.get('ensemble_weight'),
          'ensemble_member': first.get('ensemble_member'),
          'neighbours_weight': first.get('neighbours_weight'),
          'wsabie_p@1': (float(np.mean([g['wsabie_p@1'] for g in got[:seeds]]))
                         if 'wsabie_p@1' in first else None),
          **_mean_over_seeds(got[:seeds])}


def _mean_over_seeds(got: list[dict]) -> dict:
  """p@1, p@5 and MAP averaged over runs of different seeds, with p@1's
  standard error of that mean where there are several (else None)."""
  p1 = np.array([g['p@1'] for g in got])
  sem = float(p1.std(ddof=1) / np.sqrt(len(p1))) if len(p1) > 1 else None
  return {**{k: float(np.mean([g[k] for g in got])) for k in ('p@1', 'p@5', 'map')},
          'p@1_sem': sem}


def lightfm_settings(num_labels: int) -> tuple[int, int]:
  """LightFM's two WARP settings beside ours: its default budget of draws
  (10) and one that draws until a violator among every label (Y)."""
  return 10, num_labels


def lightfm_reads(train, test, dim, threads, budgets, max_sampled, seed: int = 0) -> list[dict]:
  from lightfm import LightFM
  interactions, features = timed.lightfm_inputs(train)
  lfm = LightFM(no_components=dim, loss='warp', random_state=seed, max_sampled=max_sampled)
  out, spent, epochs = [], 0.0, 0
  for budget in budgets:
    while spent < budget:
      t = time.perf_counter()
      lfm.fit_partial(interactions, user_features=features, epochs=1, num_threads=threads)
      spent += time.perf_counter() - t
      epochs += 1
    out.append({'system': f'LightFM max_sampled={max_sampled}', 'budget': budget, 'dim': dim,
                'seconds': spent, 'epochs': float(epochs),
                'pairs_per_sec': epochs * interactions.nnz / spent,
                **scored(*timed.lightfm_as_params(lfm, test))})
  return out


def _lightfm_seeds(train, test, dim, threads, budgets, max_sampled, seeds: int) -> list[dict]:
  """LightFM's rows (`lightfm_reads`) with its random_state 0 … seeds − 1: at
  each budget the mean test figures, p@1's standard error (seeds > 1),
  the mean pairs/s and epochs, and every seed's p@1."""
  runs = [lightfm_reads(train, test, dim, threads, budgets, max_sampled, seed) for seed in range(seeds)]
  return [{**at[0], **{k: float(np.mean([r[k] for r in at]))
                       for k in ('seconds', 'epochs', 'pairs_per_sec')},
           'p@1_runs': [r['p@1'] for r in at], **_mean_over_seeds(at)}
          for at in zip(*runs)]

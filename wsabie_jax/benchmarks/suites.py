"""The benchmark suites of launch/benchmark.py, each printing its table and
returning its figures: step cost against Y and d, LightFM side by side,
exact-evaluation speed, paper 004 Table 1's seconds per epoch."""
from __future__ import annotations

import os
import resource
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import evaluation, metrics
from wsabie_jax.data import batching, dataset, synthetic
from wsabie_jax.data import settings as data_config
from wsabie_jax.benchmarks import accelerator, timed
from wsabie_jax.api import configs, run as run_lib
from wsabie_jax.methods import common, wsabie as wsabie_method
from wsabie_jax.skipgram import step as skipgram_step
from wsabie_jax.wsabie import step as step_lib

SUITES = ('step_cost', 'lightfm', 'eval', 'skipgram_epoch', 'loop')  # 'all'
EXTRA_SUITES = ('accelerator', 'panel', 'panel_search', 'folds', 'tables', 'profile',
                'checkpoints', 'input', 'peers')  # by name only: long, LightFM or data
NAMES = SUITES + EXTRA_SUITES + ('all',)  # what --suite may name


def unknown(names) -> list[str]:
  """The names among `names` that are no suite."""
  return sorted(set(names) - set(NAMES))


def step_cost(small: bool):
  B, K, D, F = (32, 10, 8, 5) if small else (256, 100, 64, 50)
  big = 5000 if small else 100_000
  rng = np.random.default_rng(0)
  rows = []
  for Y, d in [(1000, 10_000), (big, 10_000), (10_000, 1000), (10_000, big)]:
    pos = np.sort(rng.choice(Y, (B, 1)), axis=1).astype(np.int32)
    batch = batching.PairBatch(
        label_BxQ=pos, weight_BxQ=np.ones((B, 1), np.float32), pos_BxP=pos,
        num_pos_B=np.ones(B, np.int32), feat_idx_BxF=rng.integers(0, d, (B, F)).astype(np.int32),
        feat_val_BxF=rng.random((B, F)).astype(np.float32))
    cfg = step_lib.StepConfig(Y, model=step_lib.ModelConfig(dim=D),
                              loss=step_lib.LossConfig(num_draws=K))  # row-wise Adagrad
    sec = timed.timed_step(cfg, d, batch, steps=10 if small else 100)
    rows.append({'Y': Y, 'd': d, 'ms_per_step': 1e3 * sec, 'pairs_per_sec': B / sec})
  print(f'\nStep cost (B={B}, K={K}, D={D}, nnz={F}, row-wise Adagrad)')
  print(f'{"Y":>8} {"d":>8} {"ms/step":>9} {"pairs/s":>10}')
  for r in rows:
    print(f'{r["Y"]:>8} {r["d"]:>8} {r["ms_per_step"]:>9.2f} {r["pairs_per_sec"]:>10,.0f}')
  ratios = {'Y_ratio': rows[1]['ms_per_step'] / rows[0]['ms_per_step'],
            'd_ratio': rows[3]['ms_per_step'] / rows[2]['ms_per_step']}
  print(f'step time ratio Y {big:,} / 1,000: {ratios["Y_ratio"]:.2f}; '
        f'd {big:,} / 1,000: {ratios["d_ratio"]:.2f}')
  return {'rows': rows, **ratios}


def side_by_side(name: str, budget: float, small: bool):
  train, test, corel = timed.lightfm_data(name, small)
  dim = 64
  if corel is not None:  # the tuned Corel5k settings, with LightFM's D
    cfg = step_lib.StepConfig(
        train.num_labels, model=step_lib.ModelConfig(dim=dim, max_norm=corel.model.max_norm),
        loss=step_lib.LossConfig(num_draws=corel.loss.num_draws),
        optim=step_lib.OptimConfig(learning_rate=corel.optim.learning_rate))
    batch_size = corel.train.batch_size
  else:  # set by 40-second runs of ours alone: max_norm 1 → 3 was worth +0.07 p@1, and
    # K = 20 draws at B = 512 run 2× the pairs/s of K = 100 at B = 256 for the same p@1
    cfg = step_lib.StepConfig(train.num_labels, model=step_lib.ModelConfig(dim=dim, max_norm=3.0),
                              loss=step_lib.LossConfig(num_draws=20),
                              optim=step_lib.OptimConfig(learning_rate=0.2))
    batch_size = 512
  padded_test = batching.pad_images(test)
  ours_params, ours_epochs = timed.train_ours(train, cfg, batch_size, budget)
  ours = timed.summarize(ours_epochs)
  ours.update(evaluation.evaluate_params(ours_params, padded_test, ks=(1, 10)))
  lfm, lfm_epochs = timed.train_lightfm(train, dim, budget)
  theirs = timed.summarize(lfm_epochs)
  theirs.update(evaluation.evaluate_params(*timed.lightfm_as_params(lfm, test), ks=(1, 10)))
  print(f'\n{name}: {train.num_images:,} train / {test.num_images:,} test images, '
        f'Y={train.num_labels:,}, d={train.num_features:,}, D={dim}, budget {budget:.0f} s each')
  print(f'{"":<12} {"pairs/s":>10} {"epochs":>7} {"p@1":>7} {"p@10":>7} {"1st ep/s":>10} {"last ep/s":>10}')
  for who, r in (('wsabie_jax', ours), ('LightFM', theirs)):
    print(f'{who:<12} {r["examples_per_sec"]:>10,.0f} {r["epochs"]:>7.1f} {r["p@1"]:>7.4f} '
          f'{r["p@10"]:>7.4f} {r["first_epoch_rate"]:>10,.0f} {r["last_epoch_rate"]:>10,.0f}')
  ratios = {'speed_ratio': ours['examples_per_sec'] / theirs['examples_per_sec'],
            'p@1_ratio': ours['p@1'] / max(theirs['p@1'], 1e-9),
            'ours_last_over_first': ours['last_epoch_rate'] / ours['first_epoch_rate'],
            'lightfm_last_over_first': theirs['last_epoch_rate'] / theirs['first_epoch_rate']}
  print('ratios: ' + ', '.join(f'{k} {v:.2f}' for k, v in ratios.items()))
  return {'ours': ours, 'lightfm': theirs, **ratios}


def eval_speed(small: bool):
  Y, D, n, batch = (5000, 16, 512, 128) if small else (100_000, 64, 4096, 256)
  rng = np.random.default_rng(0)
  W = jnp.asarray(rng.standard_normal((Y, D)), jnp.float32)
  images = jnp.asarray(rng.standard_normal((n, D)), jnp.float32)
  pos = jnp.asarray(rng.integers(0, Y, (n, 4)), jnp.int32)
  run = lambda i: metrics.rank_and_top_k(images[i:i + batch], W, pos[i:i + batch], k=10,
                                         score_kind='dot', chunk=8192)
  jax.block_until_ready(run(0))
  rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  t = time.perf_counter()
  for i in range(0, n, batch):
    jax.block_until_ready(run(i))
  sec = time.perf_counter() - t
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  out = {'Y': Y, 'D': D, 'images_per_sec': n / sec, 'seconds_per_image': sec / n,
         'peak_rss_mib': rss / 1024, 'rss_growth_mib': (rss - rss0) / 1024,
         'W_mib': Y * D * 4 / 2**20}
  print(f'\nExact evaluation, Y={Y:,}, D={D}: {out["images_per_sec"]:,.0f} images/s '
        f'({1e3 * out["seconds_per_image"]:.2f} ms/image; paper 000 Table 6: 170 ms), exact ranks of '
        f'4 positives + top-10; peak RSS {out["peak_rss_mib"]:,.0f} MiB (W is {out["W_mib"]:.0f} MiB)')
  out['rows_times'] = rows_times_speed(small)
  return out


# (d, K, F): the tables evaluation multiplies sparse rows by, at the widths
# where evaluation.DENSE_AT's rule changes sides (Delicious' V and linear
# member, debtags' member, medical's V).
ROWS_TIMES_SHAPES = ((501, 128, 256), (501, 983, 16), (501, 983, 256), (11_975, 433, 64),
                     (11_975, 433, 256), (1_450, 128, 16), (1_450, 128, 64))


def rows_times_speed(small: bool) -> list[dict]:
  """ms a batch of 256 rows times a d×K table, T's rows gathered beside the
  rows written out dense, and which evaluation.rows_times takes."""
  shapes = ((512, 8, 4), (64, 8, 32)) if small else ROWS_TIMES_SHAPES
  rng = np.random.default_rng(0)
  forms = {kind: jax.jit(lambda T, i, v, kind=kind: evaluation.rows_times(T, i, v, kind == 'dense'))
           for kind in ('gathered', 'dense')}
  rows = []
  for d, K, F in shapes:
    T = jnp.asarray(rng.standard_normal((d, K)), jnp.float32)
    idx = jnp.asarray(np.stack([rng.choice(d, F, replace=False) for _ in range(256)]), jnp.int32)
    val = jnp.asarray(rng.random((256, F)), jnp.float32)
    row = {'d': d, 'K': K, 'F': F,
           'rule': 'dense' if evaluation.written_out_dense(d, F) else 'gathered'}
    for kind, form in forms.items():
      jax.block_until_ready(form(T, idx, val))
      t = time.perf_counter()
      for _ in range(5):
        jax.block_until_ready(form(T, idx, val))
      row[f'{kind}_ms'] = 1e3 * (time.perf_counter() - t) / 5
    rows.append(row)
  print('\nSparse rows times a table (B 256): T\'s rows gathered vs the rows written out dense')
  print(f'{"d":>7} {"K":>5} {"F":>5} {"d/F":>6} {"gathered ms":>12} {"dense ms":>9} '
        f'{"gathered ÷ dense":>17} {"rule":>9}')
  for r in rows:
    print(f'{r["d"]:>7,} {r["K"]:>5} {r["F"]:>5} {r["d"] / r["F"]:>6.0f} {r["gathered_ms"]:>12.2f} '
          f'{r["dense_ms"]:>9.2f} {r["gathered_ms"] / r["dense_ms"]:>17.2f} {r["rule"]:>9}')
  return rows


SKIPGRAM_ROWS = (('Fast0Tag', 'fast0tag', False), ('Fixed WV', 'xent', False),
                 ('Proposed', 'xent', True))


def skipgram_epoch(small: bool):
  sizes = [(50, 600), (200, 600)] if small else [(291, 17_665), (925, 102_709),
                                                (10_000, 102_709), (30_000, 102_709)]
  widths, batch_size = ((32, 16), 32) if small else ((1024, 300), 256)
  rows = []
  for Y, n in sizes:
    spec = synthetic.SyntheticSpec(num_labels=Y, num_features=5000, nnz=40, signal=0.5)
    world = synthetic.make_world(spec)
    train = dataset.normalize(synthetic.generate(spec, n, 'train', world=world), 'l2')
    stream = batching.ImageStream(train, batching.pad_images(train), batch_size, 0)
    _, vectors = synthetic.pretrained_word_vectors(spec, world, widths[-1])
    steps_per_epoch = -(-n // batch_size)
    row = {'labels': Y, 'images': n}
    for name, loss, joint in SKIPGRAM_ROWS:
      for sampled in (False, True):
        cfg = skipgram_step.SkipGramConfig(
            5000, Y, model=skipgram_step.TowerConfig(widths=widths),
            loss=skipgram_step.SkipGramLoss(kind=loss, sampled=sampled, joint=joint))
        sec = timed.timed_skipgram_step(cfg, vectors, stream, train.label_frequencies(),
                                               steps=3 if small else 20)
        row[f'{name} {"sampled" if sampled else "full"}'] = sec * steps_per_epoch
    rows.append(row)
  names = [f'{n} {m}' for n, _, _ in SKIPGRAM_ROWS for m in ('full', 'sampled')]
  print(f'\nSeconds per epoch (paper 004 Table 1), B={batch_size}, tower {widths}')
  print(f'{"labels":>7} {"images":>8} ' + ' '.join(f'{n:>18}' for n in names) + '  full/sampled (proposed)')
  for r in rows:
    print(f'{r["labels"]:>7} {r["images"]:>8} ' + ' '.join(f'{r[n]:>18.2f}' for n in names)
          + f'  {r["Proposed full"] / r["Proposed sampled"]:.1f}×')
  print('Paper 004 Table 1 (291 / 925 labels; full, sampled): Fast0Tag 2.12 0.39 / 43.6 3.22; '
        'Fixed WV 1.21 0.32 / 9.3 1.94; Proposed 1.30 0.43 / 10.9 2.31 s')
  return rows


def run(suites, small: bool = False, budget_seconds: float = 130.0,
        data=('synthetic', 'corel5k'), panel=('corel5k',), panel_budgets=(10.0, 60.0, 300.0),
        panel_config: str = 'configs/wsabie_mulan.py', panel_round: int = 1,
        panel_runs: int = 3, panel_overrides: dict | None = None,
        panel_search_peer: bool = False, panel_seeds: int = 1,
        accelerator_tables=accelerator.TABLES, accelerator_labels=None,
        accelerator_webscale: str = '', folds_peers: bool = False,
        folds_choice: bool = False, folds_neighbours: bool = False,
        folds_members: bool = False) -> dict:
  """The named suites ('all' for every one), with the device and CPU count.
  `panel_overrides` ({'train.select_metric': 'p@1'}): ours' config in the panel;
  `panel_seeds`: the panel's seeds for every system (ours, LightFM, the peers).
  `panel_search_peer`: LightFM on panel_search's validation splits too.
  `accelerator_tables`, `accelerator_labels`: the accelerator suite's tables
  and its grid's Ys (None: all), its panel table on the `panel` sets;
  `accelerator_webscale`: the web-scale shards for its shipped table ('' leaves
  them out); `folds_peers`: the peers on the folds suite's folds too; `folds_choice`: its member and λ chosen on the other folds;
  `folds_neighbours`: the neighbours' votes' grid on its folds; `folds_members`:
  each ensemble member alone on its folds."""
  if unknown(suites):
    raise ValueError(f'unknown suites {unknown(suites)}: choose from {NAMES}')
  suites = set(SUITES) | set(suites) if 'all' in suites else set(suites)
  result = {'device': str(jax.devices()[0]), 'cpu_count': os.cpu_count()}
  if 'step_cost' in suites:
    result['step_cost'] = step_cost(small)
  if 'eval' in suites:
    result['eval'] = eval_speed(small)
  if 'skipgram_epoch' in suites:
    result['skipgram_epoch'] = skipgram_epoch(small)
  if 'loop' in suites:
    result['loop'] = loop_speed(small)
  if 'lightfm' in suites:
    result['lightfm'] = {name: side_by_side(name, budget_seconds, small) for name in data}
  if 'accelerator' in suites:
    result['accelerator'] = accelerator.run(small, budget_seconds, tables=accelerator_tables,
                                            labels=accelerator_labels,
                                            webscale_shards=accelerator_webscale,
                                            panel_specs=panel, panel_config=panel_config)
  if 'panel' in suites:
    from wsabie_jax.benchmarks import panel as panel_lib
    result['panel'] = panel_lib.compare(panel, panel_budgets, config_path=panel_config,
                                        runs=panel_runs, overrides=panel_overrides,
                                        seeds=panel_seeds)
  if 'profile' in suites:
    from wsabie_jax.benchmarks import step_profile
    result['profile'] = step_profile.run(panel, panel_config, overrides=panel_overrides)
  if 'tables' in suites:
    from wsabie_jax.benchmarks import gather_vs_whole
    result['tables'] = {'data': gather_vs_whole.on_data(panel, panel_config),
                        'grid': gather_vs_whole.grid(small)}
  if 'checkpoints' in suites:
    result['checkpoints'] = checkpoint_cost(small)
  if 'peers' in suites:
    result['peers'] = peer_suite(panel, seeds=panel_seeds)
  if 'input' in suites:
    webscale = configs.load('wsabie_webscale:small' if small else 'wsabie_webscale')
    from wsabie_jax.benchmarks import call_building
    where = accelerator_webscale or webscale.data.shards_dir
    result['input'] = input_rate(where, webscale.train.batch_size, steps=40 if small else 3000)
    print('\nA call built in place against built and stacked, its shards held:', flush=True)
    result['call_building'] = call_building.compare(
        where, webscale.train.batch_size, steps=40 if small else 2000, runs=2 if small else 5)
  if 'folds' in suites:
    from wsabie_jax.benchmarks import folds
    result['folds'] = folds.compare(panel, panel_overrides or {}, budget_seconds, panel_config,
                                    peers=folds_peers, choice=folds_choice,
                                    neighbour_grid=folds_neighbours, members=folds_members)
  if 'panel_search' in suites:
    from wsabie_jax.benchmarks import panel_search
    result['panel_search'] = panel_search.choose(panel, panel_search.SEARCH[panel_round],
                                                 budget_seconds, peer=panel_search_peer)
  return result


def _loop_configs(small: bool) -> dict:
  """The default job, and the LightFM side by side's synthetic settings (Y = d = 10,000,
  ~50 non-zeros, K = 20, B = 512, C = 3, lr 0.2)."""
  default = configs.load('wsabie_synthetic' + (':small' if small else ''))
  data = data_config.synthetic_data(num_labels=500 if small else 10_000,
                                num_features=1000 if small else 10_000, nnz=20 if small else 50,
                                signal=0.5)
  data.update(num_train=20_000 if small else 200_000, num_test=1000, validation_fraction=0.01)
  side = wsabie_method.base_config(data)
  side.model.max_norm = 3.0
  side.loss.num_draws = 20
  side.optim.learning_rate = 0.2
  side.train.batch_size = 512
  return {'default job': default, 'benchmark synthetic': side}


def loop_speed(small: bool = False, steps: int = 0) -> list[dict]:
  """End-to-end pairs/s of the training loop (train_examples_per_sec: step time
  only, compilation and validation left out) at steps_per_call 1 and 16, beside
  the step alone on one real batch of the same run."""
  rows = []
  for name, config in _loop_configs(small).items():
    n = steps or (40 if small else 2000)
    config.train.update(max_steps=n, eval_every_steps=n, checkpoint_every_steps=n,
                        eval_subset=200, log_every_steps=10**6)
    splits = common.load_splits(config)
    cfg = wsabie_method.step_config(config, splits[0].num_labels)
    stream = batching.PairStream(splits[0], config.train.batch_size, config.seed)
    alone = timed.timed_step(cfg, splits[0].num_features, stream.batch(1),
                                    steps=20 if small else 300)
    row = {'run': name, 'B': config.train.batch_size, 'K': cfg.loss.num_draws,
           'step_alone_pairs_per_sec': config.train.batch_size / alone}
    for per_call in (1, 16):
      config.train.steps_per_call = per_call
      with tempfile.TemporaryDirectory() as workdir:
        got = run_lib.train_and_evaluate(config, workdir)
      row[f'end_to_end_{per_call}'] = got['train_examples_per_sec']
    rows.append(row)
  print('\nTraining loop vs the step alone (pairs/s; end to end = steps only)')
  print(f'{"run":<22} {"B":>5} {"K":>5} {"step alone":>11} {"1/call":>9} {"16/call":>9} '
        f'{"16/call ÷ alone":>16}')
  for r in rows:
    print(f'{r["run"]:<22} {r["B"]:>5} {r["K"]:>5} {r["step_alone_pairs_per_sec"]:>11,.0f} '
          f'{r["end_to_end_1"]:>9,.0f} {r["end_to_end_16"]:>9,.0f} '
          f'{r["end_to_end_16"] / r["step_alone_pairs_per_sec"]:>16.2f}')
  return rows


def checkpoint_cost(small: bool = False) -> list[dict]:
  """Seconds to save (written and waited for) and restore (verified) a WSABIE
  state at the web-scale config's table sizes (Y = 100,000, d = 10,000,
  D = 100) and at 10× its labels, beside the seconds of the checksums alone
  (checkpoints.digests: every array hashed once on save, once on restore)."""
  from wsabie_jax.training import checkpoints
  rows = []
  for num_labels in ((1000,) if small else (100_000, 1_000_000)):
    state = wsabie_method.init_state(configs.load('wsabie_webscale'), 10_000, num_labels)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(state))
    with tempfile.TemporaryDirectory() as workdir:
      ckpts = checkpoints.Checkpoints(workdir)
      start = time.perf_counter()
      ckpts.save(ckpts.latest, state, {'step': 0})
      ckpts.latest.wait_until_finished()
      save = time.perf_counter() - start
      start = time.perf_counter()
      ckpts.restore(ckpts.latest, state)
      restore = time.perf_counter() - start
      ckpts.close()
    start = time.perf_counter()
    checkpoints.digests(state, {})
    digest = time.perf_counter() - start
    rows.append(dict(num_labels=num_labels, state_mib=nbytes / 2**20, save_seconds=save,
                     restore_seconds=restore, digest_seconds=digest,
                     digest_share_of_save=digest / save, digest_share_of_restore=digest / restore))
    print(f'Y {num_labels:>9,}  state {nbytes / 2**20:7.1f} MiB  save {save:6.2f} s  restore '
          f'{restore:6.2f} s  checksums {digest:5.2f} s ({digest / save:.0%} of save, '
          f'{digest / restore:.0%} of restore)')
  return rows


def input_rate(shards_dir: str, batch_size: int, threads=(1, 2, 4, 8), steps: int = 400,
               steps_per_call: int = 64) -> list[dict]:
  """The streamed input alone (data/shards.py, as training/dispatch.py builds it):
  pairs/s at which calls of `steps_per_call` batches of the shards in
  `shards_dir`/train are built into stacked arrays, at each thread count, from a cold
  start (shard loads included). The web-scale epoch is bound by the step, not
  the input, where this rate exceeds the step's."""
  import concurrent.futures
  import pathlib
  from wsabie_jax.data import shards
  from wsabie_jax.training import dispatch
  rows = []
  for n in threads:
    stream = shards.ShardedPairStream(shards.ShardSet(pathlib.Path(shards_dir) / 'train'),
                                      batch_size, seed=0)
    pool = concurrent.futures.ThreadPoolExecutor(n) if n > 1 else None  # (1: this thread)
    start = time.perf_counter()
    try:
      for first in range(0, steps, steps_per_call):
        dispatch.streamed_call(stream, first, min(steps_per_call, steps - first), steps_per_call,
                               pool=pool)
    finally:
      if pool:
        pool.shutdown()
    seconds = time.perf_counter() - start
    rows.append({'threads': n, 'pairs_per_sec': steps * batch_size / seconds,
                 'held_mib': stream.held_bytes / 2**20})
    print(f'{n:>2} threads: {rows[-1]["pairs_per_sec"]:>12,.0f} pairs/s (B = {batch_size}, '
          f'{steps} steps, shards held at most {rows[-1]["held_mib"]:,.0f} MiB)', flush=True)
  return rows


def peer_suite(specs, threads: int = 2, seeds: int = 1) -> dict:
  """The extreme-classification libraries alone (benchmarks/peers.py) on each
  panel set's training and test files, raw and tf-idf, each row the mean over
  `seeds` seeds: {set: rows}."""
  import ml_collections
  from wsabie_jax.benchmarks import panel as panel_lib, peers
  from wsabie_jax.data import load_splits
  out = {}
  for spec in specs:
    name, data = panel_lib.data_config(spec)
    train, _, test = load_splits(ml_collections.ConfigDict(
        {**data.to_dict(), 'normalize': 'none', 'bias_feature': 0.0}))
    print(f'\n{name}: {train.num_images:,} train / {test.num_images:,} test, '
          f'Y={train.num_labels}, d={train.num_features}', flush=True)
    out[name] = peers.run(train, test, threads, seeds=seeds)
  return out

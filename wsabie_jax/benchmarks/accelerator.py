"""launch/benchmark.py --suite=accelerator: does the loop feed the device?

Six tables, each printed and returned (corel5k, shipped, batches, panel,
lightfm, then grid):
  grid     the step alone (one dispatch a step on a fixed batch), the step
           that gathers and packs that batch on the device from its row ids
           (as each step of the loop's calls does there), the step alone
           over the fresh batches the loop trains on (`fresh`: the like-for-
           like column) and the training loop end to end
           (train_examples_per_sec: the steps' time, compilation and
           validation left out) at B ∈ {1,024, 4,096}, K ∈ {100, 1,000},
           D = 100, Y ∈ {10k, 100k, 1M}; the loop at steps_per_call 1 and at
           the default (the platform's, training/settings.py), the latter also
           with the other train.call_length (`other length`) and with
           train.gather_ahead (a call's batches gathered before its
           steps, in one pass); at B = 4,096,
           K = 100, Y = 100k also the step alone with train.deterministic
           (XLA's deterministic ops) and with model.matmul_precision
           'tensorfloat32', to show what exactness costs. With `profile_dir`
           the default loop again with PROFILE_CALLS calls traced
           (train.profile_calls), the trace kept there a row and read
           (training/profile.py `summary`): the share of the calls' time
           the device had work (`device busy`).
  lightfm  the benchmark's synthetic data (200,000 images, Y = d = 10,000,
           ~50 non-zeros, D = 64): ours at B = 4,096, K = 100 against
           LightFM's WARP given every CPU thread (os.cpu_count()), the same
           budget each; ours evaluated on the test split on a schedule, so
           the table reports when ours first reached LightFM's final p@1.
  corel5k  the Corel5k config's end-to-end pairs/s (compare with the same
           command on a CPU).
  shipped  the shipped configs as a user runs them, each for the budget
           (SHIPPED), and the web-scale epoch from shards given
           (--accelerator_webscale_shards): pairs/s, the loop's wait for
           input, test p@1 and the values each fitted to the data and device.
  batches  the Mulan config on Corel5k at its fitted B, 2B and 4B for the
           same wall-clock: whether a larger batch costs p@1 on the device.
  panel    the Mulan config end to end on each --panel set (debtags:
           'libsvm:TRAIN:TEST') with the values it fitted, beside the
           extreme-classification libraries trained to completion on every
           CPU thread of the host, and the seconds of steps ours takes on
           the device to reach the best one's test p@1.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import tempfile

import jax

from wsabie_jax.data import settings as data_config
from wsabie_jax.core import evaluation
from wsabie_jax.data import batching
from wsabie_jax.benchmarks import panel, timed
from wsabie_jax.api import configs, run as run_lib
from wsabie_jax.methods import common, wsabie as wsabie_method
from wsabie_jax.training import profile, settings
from wsabie_jax.wsabie import step as step_lib


def _grid_data(num_labels: int, small: bool):
  data = data_config.synthetic_data(num_labels=num_labels, num_features=10_000 if not small else 1000,
                                nnz=50 if not small else 10, signal=0.5)
  data.update(num_train=20_000 if small else 100_000, num_test=200 if small else 1000,
              validation_fraction=0.01)
  return data


GRID_LABELS = (10_000, 100_000, 1_000_000)
SMALL_GRID_LABELS = (500, 5000)
PROFILE_CALLS = 8  # the grid's traced calls a row (with profile_dir)
TABLES = ('corel5k', 'shipped', 'batches', 'panel', 'lightfm', 'grid')


def grid(small: bool, seconds: float, steps_per_call: int, labels=None,
         shapes=None, profile_dir=None) -> list[dict]:
  """The grid's rows at each Y in `labels` (default GRID_LABELS, or
  SMALL_GRID_LABELS when small), each (B, K) of `shapes` (default all four): a
  device call too short for all twelve rows takes the rows left. With
  `profile_dir`, each row's default loop traced there too (`_traced_loop`)."""
  Bs, Ks = ((64, 256), (10, 50)) if small else ((1024, 4096), (100, 1000))
  shapes = shapes or [(B, K) for B in Bs for K in Ks]
  Ys = labels or (SMALL_GRID_LABELS if small else GRID_LABELS)
  deterministic_at = (256, 10, 500) if small else (4096, 100, 100_000)
  rows = []
  platform = jax.devices()[0].platform
  other = 'traced' if settings.resolved(settings.train(), platform)['call_length'] == 'static' \
      else 'static'  # than the platform's call_length
  for Y in Ys:
    data = _grid_data(Y, small)
    for B, K in shapes:
      config = wsabie_method.base_config(data)
      config.model.dim = 100
      config.loss.num_draws = K
      config.train.update(batch_size=B, eval_every_steps=10**9, checkpoint_every_steps=10**9,
                          eval_subset=100, log_every_steps=10**9)
      train = common.load_splits(config)[0]
      cfg = wsabie_method.step_config(config, train.num_labels)
      stream = batching.PairStream(train, B, 0)
      batch = stream.batch(1)
      row = {'Y': Y, 'B': B, 'K': K}
      row['alone'] = B / timed.timed_step(cfg, train.num_features, batch,
                                          steps=20 if small else 200)
      row['alone_gathered'] = B / timed.timed_gathered_step(cfg, stream, train.num_features,
                                                            steps=20 if small else 200)
      row['alone_fresh'] = B / timed.timed_fresh_steps(cfg, stream, train.num_features,
                                                       steps=20 if small else 200)
      if (B, K, Y) == deterministic_at:  # what exactness costs, two ways
        row['alone_deterministic'] = B / timed.timed_step(
            cfg, train.num_features, batch, steps=10 if small else 50, deterministic=True)
        tf32 = dataclasses.replace(cfg, model=dataclasses.replace(
            cfg.model, matmul_precision='tensorfloat32'))
        row['alone_tensorfloat32'] = B / timed.timed_step(
            tf32, train.num_features, batch, steps=20 if small else 200)
      # Steps for about `seconds` at the step's own speed (a time budget would
      # count compilation, which the loop's pairs/s leaves out); at one step a
      # call at most 500 (a dispatch each: on an H200, 14× the step's time).
      steps = max(4 * steps_per_call, int(seconds * row['alone'] / B))
      # The loop: at 1 step a call; at the default with its call_length ('auto':
      # the platform's), with the other length, and with gather_ahead.
      for name, per_call, ahead, length in (('loop_1', 1, False, 'auto'),
                                            (f'loop_{steps_per_call}', steps_per_call, False, 'auto'),
                                            (f'loop_{other}', steps_per_call, False, other),
                                            ('loop_ahead', steps_per_call, True, 'auto')):
        config.train.update(steps_per_call=per_call, gather_ahead=ahead, call_length=length,
                            max_steps=min(steps, 500) if per_call == 1 else steps)
        with tempfile.TemporaryDirectory() as workdir:
          got = run_lib.train_and_evaluate(config, workdir)
        row[name] = got['train_examples_per_sec']
      row['other_length'] = other
      # The step alone on the loop's next batches from where the loop's steps
      # left the model (a trained model's steps do other work than a new one's:
      # fewer violators, other rows): the loop's like for like at its own pace.
      trained = timed.trained_state(cfg, stream, train.num_features, steps, steps_per_call)
      row['alone_trained'] = B / timed.timed_fresh_steps(
          cfg, stream, train.num_features, steps=20 if small else 200, first=steps, state=trained)
      row['loop_over_alone'] = row[f'loop_{steps_per_call}'] / row['alone']
      # Like for like: the loop's pairs/s over the step alone's on the same fresh batches.
      row['loop_over_fresh'] = row[f'loop_{steps_per_call}'] / row['alone_fresh']
      row['ahead_over_fresh'] = row['loop_ahead'] / row['alone_fresh']
      row['loop_over_trained'] = row[f'loop_{steps_per_call}'] / row['alone_trained']
      if profile_dir:  # (a device whose profiler fails keeps the row's other figures)
        try:
          row['profile'] = _traced_loop(config, steps_per_call,
                                        pathlib.Path(profile_dir) / f'Y{Y}_B{B}_K{K}')
        except Exception as failed:  # noqa: BLE001 (said in the row, the grid goes on)
          row['profile'] = {'error': f'{type(failed).__name__}: {str(failed)[:300]}'}
      rows.append(row)
      _print_grid(rows[-1:], steps_per_call, header=len(rows) == 1)
  return rows


def _traced_loop(config, steps_per_call: int, folder: pathlib.Path) -> dict:
  """The default loop for PROFILE_CALLS + 1 calls, all but the first traced
  (a run of its own, the row's last, on its config: tracing slows the calls
  it covers, so the loop's untraced pairs/s stay as they were); the trace
  copied to `folder`, its `profile.summary` returned."""
  config.train.update(steps_per_call=steps_per_call, gather_ahead=False, call_length='auto',
                      max_steps=(PROFILE_CALLS + 1) * steps_per_call, profile_calls=PROFILE_CALLS)
  with tempfile.TemporaryDirectory() as workdir:
    run_lib.train_and_evaluate(config, workdir)
    shutil.copytree(pathlib.Path(workdir) / profile.FOLDER, folder, dirs_exist_ok=True)
  return profile.summary(folder)


def _print_grid(rows, per_call: int, header: bool):
  if header:
    print('\nStep alone vs the training loop end to end (pairs/s), D = 100')
    print(f'{"Y":>9} {"B":>5} {"K":>5} {"alone":>12} {"gathered":>12} {"fresh":>12} '
          f'{"loop 1/call":>12} {f"loop {per_call}/call":>13} {"gathered ahead":>14} '
          f'{"loop ÷ alone":>13} {"loop ÷ fresh":>13} {"ahead ÷ fresh":>14} '
          f'{"alone, deterministic":>21} {"alone, TF32":>12} {"trained":>12} '
          f'{"loop ÷ trained":>15} {"other length":>20} {"device busy":>12}')
  for r in rows:
    det, tf32 = r.get('alone_deterministic'), r.get('alone_tensorfloat32')
    det = f'{det:>12,.0f} ({r["alone"] / det:.1f}×)' if det else ''
    tf32 = f'{tf32:>12,.0f}' if tf32 else ''
    print(f'{r["Y"]:>9,} {r["B"]:>5} {r["K"]:>5} {r["alone"]:>12,.0f} '
          f'{r["alone_gathered"]:>12,.0f} {r["alone_fresh"]:>12,.0f} {r["loop_1"]:>12,.0f} '
          f'{r[f"loop_{per_call}"]:>13,.0f} {r["loop_ahead"]:>14,.0f} '
          f'{r["loop_over_alone"]:>13.2f} {r["loop_over_fresh"]:>13.2f} '
          f'{r["ahead_over_fresh"]:>14.2f} {det:>21} {tf32:>12} {r["alone_trained"]:>12,.0f} '
          f'{r["loop_over_trained"]:>15.2f} '
          f'{r["other_length"] + " " + format(r["loop_" + r["other_length"]], ",.0f"):>20} '
          f'{_busy(r.get("profile")):>12}', flush=True)


def _busy(profiled: dict | None) -> str:
  """The traced loop's device busy share ('' untraced, or none found)."""
  busy = (profiled or {}).get('device_busy')
  return '' if busy is None else f'{busy:.2f}'


def versus_lightfm(small: bool, budget: float, steps_per_call: int) -> dict:
  train, test, _ = timed.lightfm_data('synthetic', small)
  dim, threads = 64, os.cpu_count()
  padded_test = batching.pad_images(test)
  lfm, lfm_epochs = timed.train_lightfm(train, dim, budget, threads=threads)
  theirs = timed.summarize(lfm_epochs)
  theirs.update(evaluation.evaluate_params(*timed.lightfm_as_params(lfm, test), ks=(1, 10)))
  B = 512 if small else 4096
  cfg = step_lib.StepConfig(train.num_labels, model=step_lib.ModelConfig(dim=dim, max_norm=3.0),
                            loss=step_lib.LossConfig(num_draws=100),
                            optim=step_lib.OptimConfig(learning_rate=0.2))
  curve = []

  def on_pause(params, pairs, seconds):
    got = evaluation.evaluate_params(params, padded_test, ks=(1,))
    curve.append({'seconds': seconds, 'pairs': pairs, 'p@1': got['p@1']})

  params, epochs = timed.train_ours(train, cfg, B, budget, steps_per_call=steps_per_call,
                                           on_pause=on_pause, pause_every_seconds=budget / 60)
  ours = timed.summarize(epochs)
  ours.update(evaluation.evaluate_params(params, padded_test, ks=(1, 10)))
  reached = [c['seconds'] for c in curve if c['p@1'] >= theirs['p@1']]
  ours['seconds_to_lightfm_p@1'] = reached[0] if reached else None
  out = {'ours': ours, 'lightfm': theirs, 'curve': curve, 'threads': threads, 'B': B,
         'speed_ratio': ours['examples_per_sec'] / theirs['examples_per_sec'],
         'time_ratio': None if not reached else reached[0] / theirs['seconds']}
  print(f'\nSynthetic {train.num_images:,} images, Y = {train.num_labels:,}, D = {dim}, '
        f'{budget:.0f} s each; LightFM with {threads} threads; ours B = {B}, K = 100')
  print(f'{"":<12} {"pairs/s":>11} {"epochs":>7} {"p@1":>7} {"p@10":>7}')
  for who, r in (('wsabie_jax', ours), ('LightFM', theirs)):
    print(f'{who:<12} {r["examples_per_sec"]:>11,.0f} {r["epochs"]:>7.1f} {r["p@1"]:>7.4f} '
          f'{r["p@10"]:>7.4f}')
  when = 'never' if not reached else f'{reached[0]:.1f} s ({out["time_ratio"]:.3f} of LightFM\'s time)'
  print(f'pairs/s ratio {out["speed_ratio"]:.1f}×; ours reached LightFM\'s final p@1 '
        f'{theirs["p@1"]:.4f} after {when}', flush=True)
  return out


def corel5k(steps: int) -> dict:
  config = configs.load('wsabie_corel5k')
  config.train.update(max_steps=steps, eval_every_steps=10**9, checkpoint_every_steps=10**9,
                      log_every_steps=10**9)
  with tempfile.TemporaryDirectory() as workdir:
    got = run_lib.train_and_evaluate(config, workdir)
  out = {k: got[k] for k in ('train_examples_per_sec', 'steps', 'p@1')}
  print(f'\nCorel5k config (B = {config.train.batch_size}, K = {config.loss.num_draws}, '
        f'{config.train.steps_per_call} steps a call): {out["train_examples_per_sec"]:,.0f} pairs/s '
        f'end to end ({out["steps"]} steps)', flush=True)
  return out


# The shipped configs end to end (`shipped`): spec -> what its row is (data it ships or makes).
SHIPPED = {'wsabie_corel5k': 'Corel5k, paper 000 settings',
           'wsabie_mulan': 'the Mulan config, fitted to Corel5k',
           'wsabie_synthetic': 'the default job (50,000 synthetic images)',
           'skipgram_corel5k': 'sampled skip-gram on Corel5k'}
SMALL_SHIPPED = {'wsabie_corel5k:small': 'Corel5k, 3 epochs',
                 'wsabie_synthetic:small': 'synthetic, small'}
FITTED_SHOWN = ('train.batch_size', 'loss.num_draws', 'loss.kind', 'loss.draws',
                'train.steps_per_call', 'train.input_threads')


def shipped(budget: float, specs: dict, webscale_shards: str = '') -> list[dict]:
  """Each config of `specs` trained for `budget` seconds as a user runs it (its
  fitted values as config.json records them), then the web-scale config for
  one epoch from the shards in `webscale_shards` (python launch/make_shards.py
  --config=configs/wsabie_webscale.py writes them; '' leaves it out): end-to-end
  pairs/s, the steps' seconds, the loop's wait for input, test p@1."""
  rows = []
  for spec, what in list(specs.items()) + ([('wsabie_webscale', 'web scale, one epoch from '
                                              'shards')] if webscale_shards else []):
    config = configs.load(spec)
    if spec == 'wsabie_webscale':
      config.data.shards_dir = webscale_shards
    else:
      config.train.max_seconds = budget
    rows.append(_end_to_end(spec, what, config))
  return rows


def _end_to_end(spec: str, what: str, config) -> dict:
  with tempfile.TemporaryDirectory() as workdir:
    got = run_lib.train_and_evaluate(config, workdir)
    recorded = json.loads((pathlib.Path(workdir) / 'config.json').read_text())
  fitted = {name: recorded[name.split('.')[0]][name.split('.')[1]] for name in FITTED_SHOWN
            if name.split('.')[1] in recorded.get(name.split('.')[0], {})}
  row = {'config': spec, 'what': what, 'pairs_per_sec': got['train_examples_per_sec'],
         'train_seconds': got['train_seconds'], 'input_wait_seconds': got['input_wait_seconds'],
         'steps': got['steps'], 'p@1': got['p@1'], 'fitted': fitted}
  print(f'{spec:<26} {row["pairs_per_sec"]:>12,.0f} pairs/s {row["train_seconds"]:>7.1f} s '
        f'(input wait {row["input_wait_seconds"]:.1f} s) p@1 {row["p@1"]:.4f}  '
        + ', '.join(f'{k.split(".")[1]}={v}' for k, v in fitted.items()), flush=True)
  return row


def batch_sizes(budget: float, scales=(1, 2, 4), spec: str = 'wsabie_mulan') -> list[dict]:
  """The quality rule for an accelerator's batch sizes: the config at its
  fitted B and at `scales` times it, each for the same wall-clock `budget`:
  test p@1 and the validation metric it selects on, beside pairs/s (a larger
  B the device runs faster must not cost p@1 at equal time). WSABIE alone
  (model.ensemble 'none'): a linear member trains the same whatever B, and
  its seconds would come off every row's budget alike."""
  base = None
  rows = []
  print(f'\n{spec}: B at equal wall-clock ({budget:.0f} s each)')
  for scale in scales:
    config = configs.load(spec)
    config.train.max_seconds = budget
    config.model.ensemble = 'none'
    if base is None:
      from wsabie_jax import methods
      base = methods.of(config).fit(config)[0].train.batch_size
    config.train.batch_size = base * scale
    with tempfile.TemporaryDirectory() as workdir:
      got = run_lib.train_and_evaluate(config, workdir)
    metric = config.train.select_metric
    row = {'B': base * scale, 'pairs_per_sec': got['train_examples_per_sec'], 'p@1': got['p@1'],
           f'valid_{metric}': got[f'valid_{metric}'], 'steps': got['steps']}
    rows.append(row)
    print(f'B {row["B"]:>6}: {row["pairs_per_sec"]:>12,.0f} pairs/s, test p@1 {row["p@1"]:.4f}, '
          f'valid {metric} {row[f"valid_{metric}"]:.4f} ({row["steps"]} steps)', flush=True)
  return rows


def versus_peers(specs, budget: float, config_path: str = panel.DEFAULT_CONFIG,
                 threads: int | None = None, peer_names=None) -> list[dict]:
  """A row a panel set: the config file end to end on it for `budget`
  seconds (`_end_to_end`, its validation split panel.VALID_FRACTION), then
  the peers (`peer_names`, all by default) on `threads` threads (None: every
  CPU thread of the host) and the seconds of steps ours takes on this device
  to reach the best one's test p@1 (panel.versus_peers)."""
  threads = threads or os.cpu_count()
  rows = []
  for spec in specs:
    name, data = panel.data_config(spec)
    row = _end_to_end(name, f'{pathlib.Path(config_path).stem} on {name}', panel.on_data(
        config_path, panel.with_valid(data, panel.VALID_FRACTION), {'train.max_seconds': budget}))
    cfg, _, config, (_, test) = panel.ours_on(config_path, data)
    found = panel.versus_peers(data, cfg, config, test, threads, peer_names,
                               ensemble_at=panel.ensemble_at(config_path, data))
    best, reach = found.get('best_peer'), found.get('seconds_to_best_peer')
    rows.append({**row, 'threads': threads, **found})
    print(f'  {name}: ' + ('no peer installed' if best is None else
          f'best peer {best["peer"]} ({best["weighting"]}) p@1 {best["p@1"]:.4f} in '
          f'{best["train_seconds"]:.1f} s on {threads} threads; ours reaches it in '
          + (f'{reach:.1f} s' if reach is not None else 'more than the time allowed')),
          flush=True)
  return rows


def run(small: bool, budget: float, steps_per_call: int = 0, tables=TABLES,
        labels=None, webscale_shards: str = '', shapes=None, panel_specs=('corel5k',),
        panel_config: str = panel.DEFAULT_CONFIG) -> dict:
  """The `tables` named (of TABLES), the grid at the Ys in `labels` and the
  (B, K) in `shapes` (default all), the loop at `steps_per_call` (0: the
  default, the platform's: training/settings.py), the panel table's
  `panel_config` on `panel_specs` (benchmarks/panel.py's names)."""
  if set(tables) - set(TABLES):
    raise ValueError(f'unknown accelerator tables {sorted(set(tables) - set(TABLES))}: '
                     f'choose from {TABLES}')
  steps_per_call = steps_per_call or settings.for_platform(
      settings.train(), jax.devices()[0].platform)['steps_per_call']
  seconds = 2.0 if small else 3.0
  # The short tables first: a run cut off by a time limit still has them
  # printed, and the grid's rows print as each ends.
  makers = {'corel5k': lambda: corel5k(200 if small else 5000),
            'shipped': lambda: shipped(2.0 if small else budget,
                                       SMALL_SHIPPED if small else SHIPPED, webscale_shards),
            'batches': lambda: batch_sizes(2.0 if small else budget, (1, 2) if small else (1, 2, 4)),
            'panel': lambda: versus_peers(panel_specs, 2.0 if small else budget, panel_config),
            'lightfm': lambda: versus_lightfm(small, budget, steps_per_call),
            'grid': lambda: grid(small, seconds, steps_per_call, labels, shapes)}
  out = {name: makers[name]() for name in TABLES if name in tables}
  return {**out, 'steps_per_call': steps_per_call}


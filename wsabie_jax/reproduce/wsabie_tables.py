"""Paper 000's tables run here: Table 2 (baselines), Table 7 (ensembles),
Table 4 (embedding size D) and Table 5 (WARP vs AUC)."""
from __future__ import annotations

import pathlib
import time

from wsabie_jax.baselines import ensemble, knn, linear as baselines
from wsabie_jax.core import evaluation
from wsabie_jax.data import batching
from wsabie_jax.api import run
from wsabie_jax.reproduce import runner
from wsabie_jax.methods.common import load_splits

PAPER_2 = ('Paper 000 Table 2 (ImageNet p@1 p@10 psib@10 MAP, %): Approx. k-NN 1.55 0.41 1.69 2.32; '
         'One-vs-Rest 2.27 1.02 3.71 5.17; PAMIRIA 3.14 1.26 4.39 6.43; WSABIE 4.03 1.48 5.18 7.75. '
         'Table 7: WSABIE-300 4.03 / 100+200 5.74 / 100+300 5.38 / 100+200+300 6.14 p@1.')


def _config(data: str, small: bool, dim=None):
  c = runner.base_config(data, small)
  if dim:
    c.model.dim = dim
  return c


def _choose(name, make, grid, padded_valid, num_labels, ev):
  """The grid point with the best validation MAP: (score_fn, setting, seconds)."""
  best = (None, None, -1.0)
  t = time.perf_counter()
  for setting in grid:
    fn = make(setting)
    got = evaluation.evaluate_ranking(fn, None, padded_valid, num_labels=num_labels, **ev)['map']
    if got > best[2]:
      best = (fn, setting, got)
  print(f'{name}: chose {best[1]} (valid MAP {best[2]:.4f})', flush=True)
  return best[0], best[1], time.perf_counter() - t


def baselines_table(workdir, data: str = 'corel5k', dims=(32, 64, 128), small: bool = False) -> str:
  """Paper 000 Table 2 (baselines) and Table 7 (ensembles of WSABIE models of
  the given sizes): table.md and table.json in workdir."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  config = _config(data, small)
  trainset, valid, test = load_splits(config)
  Y, d = trainset.num_labels, trainset.num_features
  ev = dict(ks=(1, 10), label_parents=trainset.label_parents, batch_size=128)
  pv, pt, ptrain = batching.pad_images(valid), batching.pad_images(test), batching.pad_images(trainset)
  epochs = (2,) if small else (2, 5)
  rows = {}
  rows['Approx. k-NN'] = _choose(
      'approx k-NN', lambda s: knn.RandomProjectionTree(ptrain, d, s[0]).scores(Y, k=s[1]),
      [(p, k) for p in ((2,) if small else (2, 4, 6)) for k in (10, 50)], pv, Y, ev)
  rows['Exact k-NN'] = _choose('exact k-NN', lambda k: knn.exact_scores(ptrain, d, Y, k=k),
                               (10, 50) if small else (5, 10, 20, 50, 100), pv, Y, ev)
  for name, kind in (('One-vs-Rest', 'ovr'), ('PAMIRIA', 'pamir')):
    rows[name] = _choose(name, lambda s, kind=kind: baselines.linear_scores(
        baselines.train_linear(trainset, kind, C=s[0], epochs=s[1])),
        [(C, e) for C in ((0.1, 1.0) if small else (0.01, 0.1, 1.0, 10.0)) for e in epochs],
        pv, Y, ev)
  members = []
  for dim in dims:
    run_dir = workdir / f'wsabie_D{dim}'
    t = time.perf_counter()
    run.train_and_evaluate(_config(data, small, dim), run_dir)
    params = run.Restored(run_dir).state.params
    members.append((dim, ensemble.wsabie_scores(params, config.model.score), time.perf_counter() - t))
    rows[f'WSABIE-{dim}'] = (members[-1][1], f'D={dim}', members[-1][2])
  fns = [ensemble.scale_free(f) for _, f, _ in members]
  for size in range(2, len(fns) + 1):
    chosen = list(range(len(fns) - size, len(fns)))  # the largest members
    weights, _ = ensemble.fit_weights([fns[i] for i in chosen], pv, Y, metric='map', **ev)
    label = ' + '.join(f'{w:g}·WSABIE-{members[i][0]}' for i, w in zip(chosen, weights))
    rows[f'Ensemble {label}'] = (ensemble.combine([fns[i] for i in chosen], weights), weights, 0.0)
  results = {}
  for name, (fn, setting, seconds) in rows.items():
    m = evaluation.evaluate_ranking(fn, None, pt, num_labels=Y, **ev)
    results[name] = {'setting': str(setting), 'seconds': seconds,
                     **{k: m[k] for k in ('p@1', 'p@10', 'psib@10', 'map') if k in m}}
  has_sib = trainset.label_parents is not None
  lines = [f'Data: {data}{" (small)" if small else ""}, test split ({test.num_images} '
           'images); settings chosen on validation MAP. ' + PAPER_2, '',
           '| model | p@1 | p@10 | psib@10 | MAP | setting | train + choose s |',
           '|---|---|---|---|---|---|---|']
  for name, r in results.items():
    sib = f"{r['psib@10']:.4f}" if has_sib else '–'
    lines.append(f"| {name} | {r['p@1']:.4f} | {r['p@10']:.4f} | {sib} | {r['map']:.4f} | "
                 f"{r['setting']} | {r['seconds']:.0f} |")
  text = '\n'.join(lines) + '\n'
  runner.write(workdir, text, results)
  return text




PAPER_4_5 = {
    '000-4': ('Paper 000 Table 4 (ImageNet, D: p@1 p@10 psib@10 MAP %): 100: 3.48 1.39 5.19 7.12; '
              '200: 3.91 1.47 5.23 7.66; 300: 4.03 1.48 5.19 7.75; 500: 3.95 1.44 5.07 7.58 — '
              'insensitive to D.'),
    '000-5': ('Paper 000 Table 5 (p@1 p@10 %): ImageNet AUC 1.65 0.91, WARP 4.03 1.48; Web-data AUC '
              '0.19 0.13, WARP 1.03 0.44 — WARP beats AUC.'),
}


def _row(name: str, m: dict) -> str:
  sib = f"{m['psib@10']:.4f}" if 'psib@10' in m else '–'
  return (f"| {name} | {m['p@1']:.4f} | {m['p@10']:.4f} | {sib} | {m['map']:.4f} | "
          f"{m['train_seconds']:.0f} |")


def runs_table(table: str, workdir, data: str = 'corel5k', small: bool = False) -> str:
  """Table 4 (D) or Table 5 (AUC vs WARP) on the data's WSABIE config: rows of
  field overrides, each trained from scratch."""
  if table == '000-4':
    dims = (16, 32) if small else (32, 64, 128, 256)
    rows = {f'D={d}': {'model.dim': d} for d in dims}
  elif table == '000-5':
    rows = {'AUC': {'loss.kind': 'auc'}, 'WARP': {}}
  else:
    raise ValueError(f'runs_table makes 000-4 and 000-5, not {table}')
  configs = {}
  for name, overrides in rows.items():
    c = runner.base_config(data, small)
    for path, value in overrides.items():
      section, field = path.split('.')
      c[section][field] = value
    configs[name.replace(' ', '_').replace('=', '')] = c
  results = runner.run_rows(configs, workdir)
  lines = [PAPER_4_5[table], '', '| run | p@1 | p@10 | psib@10 | MAP | train s |',
           '|---|---|---|---|---|---|']
  lines += [_row(name, results[name.replace(' ', '_').replace('=', '')]) for name in rows]
  return '\n'.join(lines) + '\n'

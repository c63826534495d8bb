"""Paper 000 Table 2 (baselines) and Table 7 (ensembles) on Corel5k or the synthetic data.

  python launch/baselines.py --data=corel5k --workdir=workdirs/baselines_corel5k
  python launch/baselines.py --data=synthetic --workdir=workdirs/baselines_synthetic

Rows: approximate k-NN (random-projection tree, depth p), exact k-NN, One-vs-Rest
(Passive-Aggressive), PAMIR-IA, WSABIE (the data's config), and ensembles of
WSABIE models of different D with weights fit on validation. Each baseline's
hyper-parameters (C, epochs, k, p) are chosen on the validation split; the
test split is scored once. Writes table.md and table.json to the workdir.
"""
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging

import configs
from wsabie_jax import baselines, ensemble, evaluation, knn, train, workdir as workdir_lib
from wsabie_jax.data import batching, load_splits

_DATA = flags.DEFINE_string('data', 'corel5k', 'corel5k, synthetic or a config file with its '
                            'argument (configs/wsabie_lear.py:espgame) for the 000-x tables.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the table go.', required=True)
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')
_DIMS = flags.DEFINE_list('dims', ['32', '64', '128'], 'Embedding sizes of the ensemble members.')

PAPER = ('Paper 000 Table 2 (ImageNet p@1 p@10 psib@10 MAP, %): Approx. k-NN 1.55 0.41 1.69 2.32; '
         'One-vs-Rest 2.27 1.02 3.71 5.17; PAMIRIA 3.14 1.26 4.39 6.43; WSABIE 4.03 1.48 5.18 7.75. '
         'Table 7: WSABIE-300 4.03 / 100+200 5.74 / 100+300 5.38 / 100+200+300 6.14 p@1.')


def _config(dim=None):
  c = configs.base_config(_DATA.value, _SMALL.value)
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


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  workdir = pathlib.Path(_WORKDIR.value)
  workdir.mkdir(parents=True, exist_ok=True)
  config = _config()
  trainset, valid, test = load_splits(config.data)
  Y, d = trainset.num_labels, trainset.num_features
  ev = dict(ks=(1, 10), label_parents=trainset.label_parents, batch_size=128)
  pv, pt, ptrain = batching.pad_images(valid), batching.pad_images(test), batching.pad_images(trainset)
  epochs = (1, 3) if _SMALL.value else (2, 5)
  rows = {}
  rows['Approx. k-NN'] = _choose(
      'approx k-NN', lambda s: knn.RandomProjectionTree(ptrain, d, s[0]).scores(Y, k=s[1]),
      [(p, k) for p in ((2,) if _SMALL.value else (2, 4, 6)) for k in (10, 50)], pv, Y, ev)
  rows['Exact k-NN'] = _choose('exact k-NN', lambda k: knn.exact_scores(ptrain, d, Y, k=k),
                               (10, 50) if _SMALL.value else (5, 10, 20, 50, 100), pv, Y, ev)
  for name, kind in (('One-vs-Rest', 'ovr'), ('PAMIRIA', 'pamir')):
    rows[name] = _choose(name, lambda s, kind=kind: baselines.linear_scores(
        baselines.train_linear(trainset, kind, C=s[0], epochs=s[1])),
        [(C, e) for C in (0.01, 0.1, 1.0, 10.0) for e in epochs], pv, Y, ev)
  members = []
  for dim in [int(x) for x in _DIMS.value]:
    run_dir = workdir / f'wsabie_D{dim}'
    t = time.perf_counter()
    train.train_and_evaluate(_config(dim), run_dir)
    vocab = workdir_lib.load_vocabulary(run_dir)
    params = workdir_lib.load_best_params(run_dir, _config(dim), vocab)
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
  lines = [f'Data: {_DATA.value}{" (small)" if _SMALL.value else ""}, test split ({test.num_images} '
           'images); settings chosen on validation MAP. ' + PAPER, '',
           '| model | p@1 | p@10 | psib@10 | MAP | setting | train + choose s |',
           '|---|---|---|---|---|---|---|']
  for name, r in results.items():
    sib = f"{r['psib@10']:.4f}" if has_sib else '–'
    lines.append(f"| {name} | {r['p@1']:.4f} | {r['p@10']:.4f} | {sib} | {r['map']:.4f} | "
                 f"{r['setting']} | {r['seconds']:.0f} |")
  text = '\n'.join(lines) + '\n'
  (workdir / 'table.md').write_text(text)
  (workdir / 'table.json').write_text(json.dumps(results, indent=2))
  print(text)


if __name__ == '__main__':
  app.run(main)

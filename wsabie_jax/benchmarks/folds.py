"""A change to the config judged on the training files alone
(launch/benchmark.py --suite=folds): each --panel set's training file cut in
FOLDS folds; on each, the config (--panel_config) and the config with
--panel_override trained through the training loop for --budget_seconds on
the other folds (its own validation split, schedule and refit, as a user's
run) and scored on the fold. p@1 and MAP pooled over the folds, so every
training example is scored once; the test files are not read. Where a
panel_search round scores a change on one split, this scores the whole run.
With `peers` (--folds_peers) the extreme-classification libraries
(benchmarks/peers.py) train on the same folds too, and the best one's pooled
p@1 is printed beside the config's: ours against them on several times the
examples of a test file, which is never read. With `choice` (--folds_choice)
every (member, λ) of the config's ensemble grid (wsabie/linear_member.py) is
scored on each fold too, and each fold's pair chosen by its MAP pooled over
the other folds: the member and weight chosen on four fifths of the file
against the config's own choice (on its validation split, or on folds of
its own training file where model.ensemble_choice resolves to 'folds':
api/fold_choice.py). With
`neighbour_grid` (--folds_neighbours) the neighbours' votes
(wsabie/neighbours.py) at every k, power and μ of NEIGHBOUR_GRID are scored
on each fold beside the run's model without its own votes. With `members`
(--folds_members) each member the run trains and the ridge member (which
'auto' leaves out), alone, trained on the fold run's whole training part
with the run's features, are scored on the fold, with their training
seconds (`members_on_fold`).
"""
from __future__ import annotations

import itertools
import pathlib
import tempfile
import time

import ml_collections
import numpy as np

from wsabie_jax.api import fold_choice, run
from wsabie_jax.benchmarks import panel, peers as peers_lib
from wsabie_jax.data import batching, load_splits, read_split, settings as data_settings
from wsabie_jax.core import evaluation
from wsabie_jax.wsabie import linear_member, neighbours

FOLDS = 5
# The neighbours' votes scored on each fold (neighbour_grid): k, the power of
# a vote's cosine, μ.
NEIGHBOUR_GRID = ((10, 30, 100), (1, 4), neighbours.WEIGHTS[1:])


def compare(specs, overrides: dict, budget: float, config_path: str = 'configs/wsabie_mulan.py',
            folds: int = FOLDS, peers: bool = False, choice: bool = False,
            neighbour_grid: bool = False, members: bool = False) -> list[dict]:
  """A row a set: pooled p@1 and MAP of the config and of the config with
  `overrides` ({'train.refit': True}; {}: the config alone), the mean and
  standard error over folds of their p@1 difference, and each one's mean
  refit steps; with `peers`, the best peer's pooled p@1 on the same folds
  ('best_peer'); with `choice`, the config's model and members with the pair
  chosen on the other folds ('choice': `_choice`); with `neighbour_grid`,
  the votes' grid ('neighbours': `_neighbour_rows`); with `members`, each
  member alone ('members': {kind: pooled p@1, MAP and mean seconds})."""
  rows = []
  for spec in specs:
    name, data = panel.data_config(spec)
    whole = read_split(data, data.train_path)  # (as the file holds it: the run normalises)
    order = np.random.default_rng(0).permutation(whole.num_images)
    variants = {'config': {}, **({'changed': overrides} if overrides else {})}
    got, peer_hits, grids, votes, alone = {key: [] for key in variants}, {}, [], [], []
    with tempfile.TemporaryDirectory(prefix=f'folds-{name}-') as tmp:
      for f, held in enumerate(np.array_split(order, folds)):
        folder = fold_choice.write_fold(whole, held, pathlib.Path(tmp) / str(f))
        rest, fold = whole.subset(np.sort(np.setdiff1d(order, held))), whole.subset(np.sort(held))
        for key, extra in variants.items():
          m = run.train_and_evaluate(_config(config_path, folder, budget, extra), folder / key)
          got[key].append((m['p@1'], m['map'], m['num_images'], m['refit_steps']))
        if choice:
          grids.append(fold_choice.member_grid(run.Restored(folder / 'config')))
        if neighbour_grid:
          votes.append(neighbours_on_fold(folder / 'config'))
        if members:
          alone.append(members_on_fold(folder / 'config'))
        for r in peers_lib.run(rest, fold, log=lambda line: None) if peers else ():
          key = f'{r["peer"]} ({r["weighting"]})'
          peer_hits[key] = peer_hits.get(key, 0.0) + r['p@1'] * fold.num_images
    rows.append(_pooled(name, got))
    if peer_hits:  # (a peer that failed on a fold pools fewer hits: it cannot come out best by it)
      best = max(peer_hits, key=peer_hits.get)
      rows[-1]['best_peer'] = {'name': best, 'p@1': peer_hits[best] / whole.num_images}
    if grids:
      rows[-1]['choice'] = _choice(grids, [n for _, _, n, _ in got['config']])
    if votes:
      rows[-1]['neighbours'] = _neighbour_rows(votes, [n for _, _, n, _ in got['config']])
    if alone:
      sizes = [n for _, _, n, _ in got['config']]
      every = lambda key: [key] * len(alone)
      rows[-1]['members'] = {kind: {'p@1': _pooled_at(alone, sizes, every(kind), 'p@1'),
                                    'map': _pooled_at(alone, sizes, every(kind), 'map'),
                                    'seconds': float(np.mean([a[kind]['seconds'] for a in alone]))}
                             for kind in alone[0]}
  print(table(rows, overrides, budget, folds))
  return rows


def neighbours_on_fold(workdir) -> dict:
  """{(k, power, μ): metrics} on a fold's run's test file (the held-out
  fold): the run's model with its member, without its own votes ((0, 0, 0)),
  and with the votes of the k nearest of the whole training file's images
  under its state at each cell of NEIGHBOUR_GRID."""
  restored, _, train, test = _fold_run(workdir)
  alone = restored.method.scorer(restored.config, restored.vocab, restored.state)
  member = linear_member.load(workdir)
  base = alone if member is None else linear_member.combined(alone, member['member'],
                                                             member['weight'])
  near, padded = neighbours.index(restored.state.params.V_dxD, train), batching.pad_images(test)
  got = {(0, 0, 0.0): evaluation.evaluate_ranking(*base, padded, ks=panel.KS)}
  for k, power, weight in itertools.product(*NEIGHBOUR_GRID):
    got[k, power, weight] = evaluation.evaluate_ranking(
        *neighbours.combined(base, alone[0], near, k, weight, power), padded, ks=panel.KS)
  return got


def members_on_fold(workdir, extra=('ridge',)) -> dict:
  """{kind: {'p@1', 'map', 'seconds'}} of each member alone (those of the
  run's model.ensemble and `extra`, in linear_member.MEMBERS' order) on a
  fold's run's test file (the held-out fold), trained on its whole training
  file as the run's features hold it (the run's preprocessing), its seconds
  timed after a first training off the clock (compiled programs, as a run's
  cache holds)."""
  _, whole, train, test = _fold_run(workdir)
  padded, got = batching.pad_images(test), {}
  kinds = set(linear_member.members(whole.model.ensemble)) | set(extra)
  for kind in [k for k in linear_member.MEMBERS if k in kinds]:
    linear_member.train(kind, train, whole.model, whole.seed)
    start = time.perf_counter()
    member = linear_member.train(kind, train, whole.model, whole.seed)
    seconds = time.perf_counter() - start
    got[kind] = {**evaluation.evaluate_ranking(linear_member.member_scores(member),
                                               linear_member.identity(train.num_labels), padded,
                                               ks=panel.KS), 'seconds': seconds}
  return got


def _fold_run(workdir):
  """(the fold's run restored, its config on the whole training file, that
  file's images and the held-out fold's), as the run's features hold them."""
  restored = run.Restored(workdir)
  whole = ml_collections.ConfigDict(restored.config.to_dict())
  whole.data.validation_fraction = 0.0
  train, _, test = load_splits(whole.data)
  return restored, whole, train, test


def _neighbour_rows(grids: list[dict], sizes: list[int]) -> dict:
  """The row's 'neighbours': each cell's pooled p@1 and MAP, and the cells
  chosen on the other folds by MAP (`chosen_on_other_folds`)."""
  every = lambda key: [key] * len(grids)
  cells = {key: {m: _pooled_at(grids, sizes, every(key), m) for m in ('p@1', 'map')}
           for key in grids[0]}
  picks = chosen_on_other_folds(grids, sizes)
  return {'cells': {f'k {k} power {p} μ {w:g}': v for (k, p, w), v in cells.items()},
          'chosen': {'p@1': _pooled_at(grids, sizes, picks, 'p@1'),
                     'map': _pooled_at(grids, sizes, picks, 'map'),
                     'picks': [f'k {k} power {p} μ {w:g}' for k, p, w in picks]}}


def chosen_on_other_folds(grids: list[dict], sizes: list[int], metric: str = 'map') -> list:
  """Each fold's key of the grids ({(member, λ): metrics}, one a fold): the
  one whose `metric` pooled over the other folds (by their sizes) is best
  (fold_choice.pick: of equals, the first in the grid's order)."""
  return [fold_choice.pick(grids, [0 if j == f else n for j, n in enumerate(sizes)], metric)
          for f in range(len(grids))]


def _pooled_at(grids: list[dict], weights: list[int], keys: list, metric: str) -> float:
  """`metric` of fold j's grid at keys[j], pooled over the folds by `weights`."""
  return sum(g[k][metric] * w for g, k, w in zip(grids, keys, weights)) / sum(weights)


def _choice(grids: list[dict], sizes: list[int]) -> dict:
  """The row's 'choice': pooled p@1 and MAP of the pairs chosen on the other
  folds, the picks, and the one pair best on every fold ('best_fixed')."""
  picks = chosen_on_other_folds(grids, sizes)
  every = lambda key: [key] * len(grids)
  fixed = max(grids[0], key=lambda key: _pooled_at(grids, sizes, every(key), 'p@1'))
  name_of = lambda key: f'{key[0] or "alone"} {key[1]:g}'
  return {'p@1': _pooled_at(grids, sizes, picks, 'p@1'),
          'map': _pooled_at(grids, sizes, picks, 'map'),
          'picks': [name_of(pick) for pick in picks],
          'best_fixed': {'pair': name_of(fixed),
                         'p@1': _pooled_at(grids, sizes, every(fixed), 'p@1')}}


def _config(config_path: str, folder: pathlib.Path, budget: float,
            overrides: dict) -> ml_collections.ConfigDict:
  """The config file on a fold's files, `budget` seconds, `overrides` applied."""
  data = data_settings.file_data('libsvm', str(folder / 'train.txt'), str(folder / 'test.txt'))
  return panel.on_data(config_path, data, {'train.max_seconds': budget, **overrides})


def _pooled(name: str, got: dict) -> dict:
  row = {'set': name}
  for key, runs in got.items():
    a = np.asarray(runs, np.float64)
    n = a[:, 2].sum()
    row[key] = {'p@1': float(a[:, 0] @ a[:, 2] / n), 'map': float(a[:, 1] @ a[:, 2] / n),
                'examples': int(n), 'refit_steps': float(a[:, 3].mean())}
  if 'changed' not in got:  # (no override: the config alone)
    return row
  diff = np.asarray([c[0] - b[0] for b, c in zip(got['config'], got['changed'])])
  row['p@1_diff'] = float(diff.mean())
  row['p@1_diff_se'] = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
  return row


def table(rows: list[dict], overrides: dict, budget: float, folds: int) -> str:
  changed = ', '.join(f'{k}={v}' for k, v in overrides.items())
  lines = [f'\n{folds} folds of each training file, {budget:g} s a run; pooled p@1 / MAP',
           f'{"set":<12} {"examples":>8}  {"config":>15}  ' + (
               f'{changed:>15}  {"Δ p@1 (± se)":>16}  {"refit steps (config, changed)":>29}'
               if overrides else f'{"":>15}  {"":>16}  {"refit steps":>14}')]
  for r in rows:
    c, o = r['config'], r.get('changed')
    lines.append(f'{r["set"]:<12} {c["examples"]:>8}  {c["p@1"]:.4f} / {c["map"]:.4f}  ' + (
        f'{o["p@1"]:.4f} / {o["map"]:.4f}  {r["p@1_diff"]:>+8.4f} ± {r["p@1_diff_se"]:.4f}'
        f'  {c["refit_steps"]:>14.0f}, {o["refit_steps"]:>6.0f}' if o else
        f'{"(no override)":>15}  {"":>16}  {c["refit_steps"]:>14.0f}'))
    if 'best_peer' in r:
      peer = r['best_peer']
      lines.append(f'{"":<12} {"":>8}  best peer on the same folds: {peer["name"]} '
                   f'{peer["p@1"]:.4f}; the config is '
                   f'{peers_lib.verdict(c["p@1"], peer["p@1"], c["examples"])}')
    if 'choice' in r:
      ch = r['choice']
      lines.append(f'{"":<12} {"":>8}  the member and λ chosen on the other folds\' MAP: '
                   f'{ch["p@1"]:.4f} / {ch["map"]:.4f} against the config\'s own choice '
                   f'{c["p@1"]:.4f} / {c["map"]:.4f} (chosen: {", ".join(ch["picks"])}); the '
                   f'best one pair on every fold: {ch["best_fixed"]["pair"]} '
                   f'{ch["best_fixed"]["p@1"]:.4f}')
    if 'neighbours' in r:
      cells, ch = r['neighbours']['cells'], r['neighbours']['chosen']
      ranked = sorted(cells, key=lambda key: -cells[key]['p@1'])
      lines.append(f'{"":<12} {"":>8}  the neighbours\' votes, pooled p@1 / MAP: without '
                   f'{cells["k 0 power 0 μ 0"]["p@1"]:.4f} / {cells["k 0 power 0 μ 0"]["map"]:.4f}; '
                   + '; '.join(f'{key} {cells[key]["p@1"]:.4f} / {cells[key]["map"]:.4f}'
                               for key in ranked[:3])
                   + f'; chosen on the other folds\' MAP {ch["p@1"]:.4f} / {ch["map"]:.4f}')
      lines.append(f'{"":<12} {"":>8}  k {neighbours.K} power {neighbours.POWER} at each μ: '
                   + ', '.join(f'{w:g} {cells[f"k {neighbours.K} power {neighbours.POWER} μ {w:g}"]["p@1"]:.4f}'
                               for w in NEIGHBOUR_GRID[2]))
    if 'members' in r:
      lines.append(f'{"":<12} {"":>8}  each member alone, pooled p@1 / MAP (seconds a fold): '
                   + '; '.join(f'{kind} {m["p@1"]:.4f} / {m["map"]:.4f} ({m["seconds"]:.2f} s)'
                               for kind, m in r['members'].items()))
  return '\n'.join(lines)

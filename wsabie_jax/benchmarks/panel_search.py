"""The search that chose configs/wsabie_mulan.py's settings
(launch/benchmark.py --suite=panel_search --panel_round=N): each candidate of
a round (benchmarks/search_rounds.py) trained on every set's training file
less a validation split and scored there, the test files unread; LightFM's
WARP on the same splits beside them (--panel_search_peer). docs/TUNING.md
has the rounds' figures.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.benchmarks import panel, timed
from wsabie_jax.core import evaluation
from wsabie_jax.benchmarks.search_rounds import SEARCH  # noqa: F401 (panel_search.SEARCH[N])
from wsabie_jax.data import batching, load_splits
from wsabie_jax.wsabie import linear_member

SELECTIONS = 10  # validations a candidate's run is kept at the best of (`choose`)


def choose(specs, candidates: list[dict], budget: float = 20.0,
           config_path: str = 'configs/wsabie_mulan.py', valid_fraction: float = 0.2,
           peer: bool = False) -> list[dict]:
  """Each candidate ({'knobs': {…fit's}, 'overrides': {'model.dim': …}}) trained
  `budget` seconds on every set's training file less a validation split, and
  scored on that split at its best of SELECTIONS validations (the test files
  are not read for this). Prints valid
  p@1 per set and each candidate's mean p@1 relative to the best on each set.
  `peer`: LightFM's WARP (max_sampled 10 and Y) on the same split too, kept
  the same way (`_peer_rows`), printed beside the candidates, not counted in
  their best."""
  rows, peers = [], []
  for spec in specs:
    name, data = panel.data_config(spec)
    data.validation_fraction = valid_fraction
    loaded = {}  # by the data section a candidate ends with (its bias feature)
    sizes = load_splits(data)[0]
    for i, cand in enumerate(candidates):
      cfg, batch_size, config = panel.ours_settings(config_path, data, sizes,
                                              cand.get('overrides'), **cand.get('knobs', {}))
      key = config.data.to_json()
      if key not in loaded:
        train, valid, _ = load_splits(config.data)
        loaded[key] = train, batching.pad_images(valid)
      train, padded = loaded[key]
      # Scored as the config's runs are kept: the best validation MAP of
      # SELECTIONS evaluations spread over the budget (off the clock), so a
      # candidate that trains faster is not marked down for overfitting sooner.
      seen = []
      params, epochs = timed.train_ours(
          train, cfg, batch_size, budget, positives_per_row=config.train.positives_per_row,
          on_pause=lambda p, *_: seen.append({**panel.scored(p, padded), 'params': _kept(p)}),
          pause_every_seconds=budget / SELECTIONS)
      seen.append({**panel.scored(params, padded), 'params': params})
      pairs, seconds = np.asarray(epochs, np.float64).sum(0)
      kept = max(seen, key=lambda m: m['map'])
      member = cand.get('member')
      kept = (_with_member(kept, train, padded, config,
                           config.model.ensemble if member is True else member) if member
              else {k: v for k, v in kept.items() if k != 'params'})
      rows.append({'set': name, 'candidate': i, 'batch_size': batch_size,
                   'num_draws': cfg.loss.num_draws, 'pairs_per_sec': pairs / seconds, **kept})
      print(f'{name:<10} #{i} {cand}  B={batch_size} K={cfg.loss.num_draws}: valid p@1 '
            f'{rows[-1]["p@1"]:.4f} MAP {rows[-1]["map"]:.4f} {rows[-1]["pairs_per_sec"]:,.0f} '
            'pairs/s', flush=True)
    if peer:
      peers += _peer_rows(name, data, sizes, config_path, budget)
  sets = sorted({r['set'] for r in rows})
  best = {s: max(r['p@1'] for r in rows if r['set'] == s) for s in sets}
  print('\ncandidate  ' + '  '.join(f'{s:>9}' for s in sets) + '  mean p@1 ÷ best')
  for i, cand in enumerate(candidates):
    mine = {r['set']: r['p@1'] for r in rows if r['candidate'] == i}
    rel = np.mean([mine[s] / max(best[s], 1e-9) for s in sets])
    print(f'#{i:<9} ' + '  '.join(f'{mine[s]:>9.4f}' for s in sets) + f'  {rel:.4f}  {cand}')
  for system in sorted({r['candidate'] for r in peers}):
    theirs = {r['set']: r['p@1'] for r in peers if r['candidate'] == system}
    print(f'{"":<10} ' + '  '.join(f'{theirs[s]:>9.4f}' for s in sets) + f'  {"":>6}  {system}')
  return rows + peers


def _kept(params):
  """A copy the next steps do not overwrite (the step donates its state)."""
  return jax.tree.map(np.array, params)


def _with_member(kept: dict, train, padded_valid, config, ensemble: str) -> dict:
  """The kept state's figures with the linear members `ensemble` names beside
  it (wsabie/linear_member.py; a candidate's 'member': 'one_vs_rest', …;
  True: the config's own), at the member and weight a run would choose: the
  best validation MAP of the grid, which this split also scores (so the figure
  leans optimistic by the choice among the grid's cells)."""
  V, W = kept['params']
  own = (lambda i, v: evaluation.embed(jnp.asarray(V), i, v)), jnp.asarray(W)
  members = linear_member.train_members(ensemble, train, config.model, config.seed)
  kind, weight, got = linear_member.choose(own, members, padded_valid, 'map', {'ks': panel.KS})
  print('  by the member and its weight: ' + ', '.join(
      f'{k or "alone"} {w:g}: p@1 {m["p@1"]:.4f} MAP {m["map"]:.4f}' for (k, w), m in got.items()),
      flush=True)
  return {**{k: got[kind, weight][k] for k in ('p@1', 'p@5', 'map')}, 'ensemble_weight': weight,
          'ensemble_member': kind or 'none'}


def _peer_rows(name: str, data, sizes, config_path: str, budget: float) -> list[dict]:
  """LightFM's WARP at max_sampled 10 and Y on the split `choose` trains the
  config on (its data section: normalisation, bias feature), at the config's
  D: one run of `budget` seconds each, read at SELECTIONS even points (off
  the clock) and kept at its best MAP, as a candidate's run is kept."""
  cfg, _, config = panel.ours_settings(config_path, data, sizes)
  train, valid, _ = load_splits(config.data)
  reads = [budget * (i + 1) / SELECTIONS for i in range(SELECTIONS)]
  rows = []
  for max_sampled in panel.lightfm_settings(train.num_labels):
    got = panel.lightfm_reads(train, valid, cfg.model.dim, 2, reads, max_sampled)
    kept = max(got, key=lambda g: g['map'])
    rows.append({'set': name, 'candidate': kept['system'], 'pairs_per_sec': got[-1]['pairs_per_sec'],
                 **{k: kept[k] for k in ('p@1', 'p@5', 'map')}})
    print(f'{name:<10} {kept["system"]}: valid p@1 {kept["p@1"]:.4f} MAP {kept["map"]:.4f} '
          f'{rows[-1]["pairs_per_sec"]:,.0f} pairs/s', flush=True)
  return rows

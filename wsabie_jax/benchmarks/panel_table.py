"""The panel's markdown table (benchmarks/panel.py): each set × budget, ours
beside LightFM's two WARP settings, their ratios and the seconds to a p@1."""
from __future__ import annotations

import numpy as np


def table(rows: list[dict], reach_at: float, reach_within: float) -> str:
  """Markdown: set × budget, each system's p@1 / p@5 / MAP and pairs/s, and
  ours ÷ the better LightFM (p@1) and ÷ LightFM max_sampled=10 (pairs/s).
  Rows averaged over seeds show p@1 ± its standard error, and the ratios
  ours' p@1 − the better LightFM's in standard errors of that difference.
  Rows with 'target_p1' add the seconds ours took to reach the better
  LightFM's p@1 at `reach_at` s (more than `reach_within`: not reached)."""
  seeded = any(r.get('p@1_sem') is not None for r in rows)
  lines = ['| set | budget | system | D | p@1 | p@5 | MAP | pairs/s | epochs |',
           '|---|---|---|---|---|---|---|---|---|']
  ratios = ['', '| set | budget | ours p@1 ÷ better LightFM | ours pairs/s ÷ LightFM (10) |'
            + (' ours − better LightFM (standard errors) |' if seeded else ''),
            '|---|---|---|---|' + ('---|' if seeded else '')]
  keyed = {}
  for r in rows:
    keyed.setdefault((r['set'], r['budget']), []).append(r)
    lines.append(f'| {r["set"]} | {r["budget"]:.0f} s | {r["system"]} | {r["dim"]} | '
                 f'{p1(r)} | {r["p@5"]:.3f} | {r["map"]:.3f} | {r["pairs_per_sec"]:,.0f} | '
                 f'{r["epochs"]:.1f} |')
  for (name, budget), group in keyed.items():
    ours = next(r for r in group if r['system'] == 'wsabie_jax')
    theirs = [r for r in group if r['system'] != 'wsabie_jax']
    if not theirs:  # (LightFM not installed)
      continue
    best = max(theirs, key=lambda r: r['p@1'])
    default = next(r for r in theirs if r['system'].endswith('=10'))
    ratios.append(f'| {name} | {budget:.0f} s | {ours["p@1"] / max(best["p@1"], 1e-9):.2f} | '
                  f'{ours["pairs_per_sec"] / default["pairs_per_sec"]:.2f} |'
                  + (f' {gap(ours, best)} |' if seeded else ''))
  if len(ratios) == 3:  # (no LightFM row to read ours against)
    ratios = []
  reach = {r['set']: r for r in rows if 'target_p1' in r}
  if reach:
    ratios += ['', f'| set | the better LightFM\'s {reach_at:.0f}-s p@1 | ours reaches it in |',
               '|---|---|---|']
    ratios += [f'| {name} | {r["target_p1"]:.3f} | '
               + (f'{r["seconds_to_target"]:.1f} s |' if r['seconds_to_target'] is not None
                  else f'> {reach_within:.0f} s |') for name, r in reach.items()]
  return '\n'.join(lines + ratios)


def p1(row: dict, digits: int = 3) -> str:
  sem = row.get('p@1_sem')
  return f'{row["p@1"]:.{digits}f}' + (f' ± {sem:.{digits}f}' if sem is not None else '')


def gap(ours: dict, theirs: dict) -> str:
  """ours' p@1 − theirs, and that in standard errors of the difference
  (the two means' errors combined)."""
  diff = ours['p@1'] - theirs['p@1']
  se = np.hypot(ours.get('p@1_sem') or 0.0, theirs.get('p@1_sem') or 0.0)
  return f'{diff:+.3f}' + (f' ({diff / se:+.1f})' if se > 0 else '')

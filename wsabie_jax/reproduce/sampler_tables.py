"""Paper 003 Tables 2 and 4 (uniform WARP, VSE-ens hinge, VSE-ens + WARP, AUC)
and Fig. 1 (draws sequential uniform WARP needs per update), run here."""
from __future__ import annotations

import math
import pathlib
import statistics

from wsabie_jax.api import configs
from wsabie_jax.reproduce import convergence, svg_plot, runner
from wsabie_jax.methods import wsabie

PAPER = ('Paper 003 Table 4 (training time, WARP / VSE-ens): OpenImages 35.65 h / 7.1 h = 5.02×, '
         'NUS-WIDE 51.46 h / 24.83 h = 2.07×, IAPR-TC12 2.38 h / 0.95 h = 2.51×.')


def _fmt_time(t: float) -> str:
  return '—' if math.isinf(t) else f'{t:.1f}'


def _fmt_speedup(s: dict, which: str) -> str:
  # A row that never reaches WARP's level is fast only to a worse model: its
  # speed-ups say nothing (the own-target one would read as a huge win).
  return '—' if math.isinf(s['time_to_reference']) else f"{s[which]:.2f}×"


def _table(data: str, speed: dict, tests: dict, rates: dict) -> str:
  lines = [f'Data: {data}. Time: seconds in training steps until validation p@5 first reaches 95% '
           'of the run\'s own best / of uniform WARP\'s best; speed-up = uniform WARP\'s time to its '
           'own 95% over the row\'s ("—": the row never reaches WARP\'s 95%). "warp" is uniform '
           'WARP with a fixed budget of K parallel draws (first violator), not Alg. 1\'s sequential '
           'draws: at K ≪ Y its rank weighting is flat (README, table 000-R1).',
           PAPER, '',
           '| row | valid p@5 best | s to 95% own | s to 95% WARP | speed-up (own) | '
           'speed-up (WARP target) | pairs/s | test p@5 | test r@5 | test MAP | test AUC |',
           '|---|---|---|---|---|---|---|---|---|---|---|']
  for row, s in speed.items():
    t = tests[row]
    lines.append(f"| {row} | {s['best']:.4f} | {_fmt_time(s['time_to_own'])} | "
                 f"{_fmt_time(s['time_to_reference'])} | {_fmt_speedup(s, 'speedup_own')} | "
                 f"{_fmt_speedup(s, 'speedup_reference')} | {rates[row]:,.0f} | {t['p@5']:.4f} | "
                 f"{t['r@5']:.4f} | {t['map']:.4f} | {t['auc']:.4f} |")
  return '\n'.join(lines) + '\n'


def _figure1(workdir: pathlib.Path, history: list[dict]):
  points = [(e['step'], e['uniform_draws_per_update']) for e in history
            if 'uniform_draws_per_update' in e and not math.isnan(e['uniform_draws_per_update'])]
  if not points:
    return
  with open(workdir / 'fig1_draws_per_update.csv', 'w') as f:
    f.write('step,draws_per_update\n' + ''.join(f'{s},{d:.2f}\n' for s, d in points))
  svg_plot.line_plot(workdir / 'fig1_draws_per_update.svg',
                     {'uniform WARP': ([p[0] for p in points], [p[1] for p in points])},
                     title='Draws uniform WARP needs per update (paper 003 Fig. 1)',
                     xlabel='training step', ylabel='expected draws per update')


def run(workdir, data: str = 'synthetic', rows=wsabie.SAMPLER_ROWS, small: bool = False,
        paper: bool = False, seeds=(0,), num_labels: int = 0) -> str:
  """Trains each row's config (configs/samplers.py:<row>,<data>[,paper]) from
  scratch with the same budget and validation schedule; writes table.md,
  table.json and Fig. 1. `paper`: paper 003's protocol (configs/samplers.py).
  `seeds`: the rows again under each training seed (the data stay the same),
  in workdir/seed<S>/, with the speed-ups' median and range over them;
  `num_labels`: the synthetic data's Y (0: the config's)."""
  if 'warp' not in rows:
    raise ValueError('rows must include warp, the reference row')
  if num_labels and data != 'synthetic':
    raise ValueError(f'num_labels sets the synthetic data\'s labels, not {data}\'s')
  workdir = pathlib.Path(workdir)
  size = (',paper' if paper else '') + (',small' if small else '')
  protocol = ("paper 003's protocol (leave-one-out, image-ID embeddings, SGD η 0.01 + L2 0.01, "
              'logistic Opt-AUC, D = 100)' if paper else "this project's protocol (random image "
              'splits, visual features, row-wise Adagrad, hinge AUC)')
  runs = {}
  for seed in seeds:
    where = workdir if len(seeds) == 1 else workdir / f'seed{seed}'
    row_configs = {row: configs.load(f'samplers:{row},{data}{size}') for row in rows}
    for c in row_configs.values():
      c.seed = seed
      if num_labels:
        c.data.synthetic.num_labels = num_labels
    tests = runner.run_rows(row_configs, where)
    histories = {row: convergence.read_history(where / row) for row in rows}
    rates = {row: tests[row]['train_examples_per_sec'] for row in rows}
    runs[seed] = (convergence.compare(histories, 'warp', 'p@5'), tests, rates)
    if seed == seeds[0]:
      _figure1(workdir, histories['warp'])
  labels = f', Y = {num_labels:,}' if num_labels else ''
  speed, tests, rates = runs[seeds[0]]
  text = _table(f"{data}{labels}{' (small)' if small else ''}, {protocol}"
                + (f'; seed {seeds[0]} of {len(seeds)}' if len(seeds) > 1 else ''),
                speed, tests, rates)
  if len(seeds) > 1:
    text += '\n' + _over_seeds(runs, rows)
  runner.write(workdir, text, {str(s): {'speed': r[0], 'test': r[1]} for s, r in runs.items()})
  return text


def _over_seeds(runs: dict, rows) -> str:
  """Each row's speed-up to WARP's 95% and test p@5 over the seeds."""
  lines = [f'Over {len(runs)} training seeds ({", ".join(map(str, runs))}): speed-up to 95% of '
           "uniform WARP's best (median, min–max; seeds where the row never got there left out), "
           'test p@5 and pairs/s (median).', '',
           '| row | reached | speed-up (WARP target) | test p@5 (min–max) | pairs/s |',
           '|---|---|---|---|---|']
  for row in rows:
    ups = sorted(r[0][row]['speedup_reference'] for r in runs.values()
                 if not math.isinf(r[0][row]['time_to_reference']))
    p5 = sorted(r[1][row]['p@5'] for r in runs.values())
    rate = statistics.median(r[2][row] for r in runs.values())
    up = f'{statistics.median(ups):.2f}× ({ups[0]:.2f}–{ups[-1]:.2f}×)' if ups else '—'
    lines.append(f'| {row} | {len(ups)} of {len(runs)} | {up} | {statistics.median(p5):.4f} '
                 f'({p5[0]:.4f}–{p5[-1]:.4f}) | {rate:,.0f} |')
  return '\n'.join(lines) + '\n'

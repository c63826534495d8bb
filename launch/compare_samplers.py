"""Paper 003 Tables 2 and 4: uniform WARP, VSE-ens (hinge), VSE-ens + WARP and AUC.

  python launch/compare_samplers.py --data=synthetic --workdir=workdirs/samplers_synthetic
  python launch/compare_samplers.py --data=corel5k --workdir=workdirs/samplers_corel5k

Trains each row's config (configs/samplers_<data>.py:<row>) in turn, from
scratch, with the same budget and validation schedule, then writes to the
workdir: table.md (speed-ups next to the paper's and test p@5, r@5, MAP, AUC),
table.json, and paper 003 Fig. 1 for uniform WARP (fig1_draws_per_update.svg
and .csv: the draws sequential uniform WARP needs per update, over training).
"""
import importlib
import json
import math
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging

from configs import samplers
from wsabie_jax import convergence, svg_plot, train

_DATA = flags.DEFINE_enum('data', 'synthetic', ['synthetic', 'corel5k'], 'Which data set.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the table go.', required=True)
_ROWS = flags.DEFINE_list('rows', list(samplers.ROWS), 'Rows to run (warp is the reference).')
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')

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
           'own 95% over the row\'s ("—": the row never reaches WARP\'s 95%).', PAPER, '',
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


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  if 'warp' not in _ROWS.value:
    raise app.UsageError('--rows must include warp, the reference row')
  workdir = pathlib.Path(_WORKDIR.value)
  configs = importlib.import_module(f'configs.samplers_{_DATA.value}')
  histories, tests, rates = {}, {}, {}
  for row in _ROWS.value:
    run_dir = workdir / row
    shutil.rmtree(run_dir, ignore_errors=True)  # every row from scratch, timed alike
    config = configs.get_config(row + (',small' if _SMALL.value else ''))
    print(f'== {row}', flush=True)
    tests[row] = train.train_and_evaluate(config, run_dir)
    histories[row] = convergence.read_history(run_dir)
    rates[row] = tests[row]['train_examples_per_sec']
  speed = convergence.compare(histories, 'warp', 'p@5')
  table = _table(_DATA.value + (' (small)' if _SMALL.value else ''), speed, tests, rates)
  (workdir / 'table.md').write_text(table)
  (workdir / 'table.json').write_text(json.dumps(
      {'speed': speed, 'test': tests}, indent=2, sort_keys=True, default=str))
  _figure1(workdir, histories['warp'])
  print(table)


if __name__ == '__main__':
  app.run(main)

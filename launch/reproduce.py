"""Runs the configs behind one of the papers' tables and writes ours beside the paper's.

  python launch/reproduce.py --table=000-4 --workdir=workdirs/reproduce [--data=corel5k] [--small]

Tables run here: 000-4 (embedding size D), 000-5 (WARP vs AUC). The others
have their own scripts, which this one runs: 000-2 and 000-7
(launch/baselines.py), 002-3 and 002-5 (launch/compare_parts.py), 003-2 and
003-4 (launch/compare_samplers.py), 004-1 (launch/benchmark.py
--suite=skipgram_epoch), 004-3 (launch/compare_skipgram.py). On this machine
they run on the synthetic data and Corel5k; for the 000-x tables `--data`
picks which, or names a config file and its argument so that the same command
runs them on the papers' real data: `--data=configs/wsabie_lear.py:espgame,DIR`
(LEAR's iccv09 files in DIR, prepared through tfds) or
`--data=configs/wsabie_folder.py:DATA_DIR` (a featurised folder of images).
Writes <workdir>/<table>.md.
"""
import os
import pathlib
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging

import configs
from wsabie_jax import train

TABLES = ('000-2', '000-4', '000-5', '000-7', '002-3', '002-5', '003-2', '003-4', '004-1', '004-3')
_TABLE = flags.DEFINE_enum('table', None, TABLES, 'Paper-table, e.g. 000-4.', required=True)
_WORKDIR = flags.DEFINE_string('workdir', 'workdirs/reproduce', 'Where runs and tables go.')
_DATA = flags.DEFINE_string('data', 'corel5k', 'corel5k, synthetic or a config file with its '
                            'argument (configs/wsabie_lear.py:espgame) for the 000-x tables.')
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')

PAPER = {
    '000-4': ('Paper 000 Table 4 (ImageNet, D: p@1 p@10 psib@10 MAP %): 100: 3.48 1.39 5.19 7.12; '
              '200: 3.91 1.47 5.23 7.66; 300: 4.03 1.48 5.19 7.75; 500: 3.95 1.44 5.07 7.58 — '
              'insensitive to D.'),
    '000-5': ('Paper 000 Table 5 (p@1 p@10 %): ImageNet AUC 1.65 0.91, WARP 4.03 1.48; Web-data AUC '
              '0.19 0.13, WARP 1.03 0.44 — WARP beats AUC.'),
}
DELEGATED = {
    '000-2': ['launch/baselines.py'], '000-7': ['launch/baselines.py'],
    '002-3': ['launch/compare_parts.py'], '002-5': ['launch/compare_parts.py'],
    '003-2': ['launch/compare_samplers.py', '--data=synthetic'],
    '003-4': ['launch/compare_samplers.py', '--data=corel5k'],
    '004-3': ['launch/compare_skipgram.py', '--study=table'],
}


DATA_OF = {'002-3': 'synthetic, WordNet mode (proxy images of objects and parts)',
           '002-5': 'synthetic, WordNet mode (proxy images of objects and parts)',
           '003-2': 'synthetic', '003-4': 'corel5k',
           '004-1': 'synthetic (timing only)', '004-3': 'synthetic with noisy word vectors'}


def _config(**overrides):
  c = configs.base_config(_DATA.value, _SMALL.value)
  for path, value in overrides.items():
    section, field = path.split('.')
    c[section][field] = value
  return c


def _row(name: str, m: dict) -> str:
  sib = f"{m['psib@10']:.4f}" if 'psib@10' in m else '–'
  return (f"| {name} | {m['p@1']:.4f} | {m['p@10']:.4f} | {sib} | {m['map']:.4f} | "
          f"{m['train_seconds']:.0f} |")


def _runs(workdir: pathlib.Path, rows: dict) -> list[str]:
  lines = ['| run | p@1 | p@10 | psib@10 | MAP | train s |', '|---|---|---|---|---|---|']
  for name, overrides in rows.items():
    run_dir = workdir / name.replace(' ', '_').replace('=', '')
    shutil.rmtree(run_dir, ignore_errors=True)
    lines.append(_row(name, train.train_and_evaluate(_config(**overrides), run_dir)))
  return lines


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  table, workdir = _TABLE.value, pathlib.Path(_WORKDIR.value)
  workdir.mkdir(parents=True, exist_ok=True)
  data = _DATA.value if table in ('000-2', '000-4', '000-5', '000-7') else DATA_OF[table]
  header = [f'Table {table}; our data: {data}{" (small)" if _SMALL.value else ""}, test split.']
  if table == '000-4':
    dims = (16, 32) if _SMALL.value else (32, 64, 128, 256)
    lines = header + [PAPER[table], ''] + _runs(workdir / table, {f'D={d}': {'model.dim': d}
                                                                  for d in dims})
  elif table == '000-5':
    lines = header + [PAPER[table], ''] + _runs(workdir / table, {
        'AUC': {'loss.kind': 'auc'}, 'WARP': {}})
  else:
    command = DELEGATED.get(table) or ['launch/benchmark.py', '--suite=skipgram_epoch',
                                       f'--out={workdir / table}.json']
    if table != '004-1':
      command = command + [f'--workdir={workdir / table}']
      if table in ('000-2', '000-7'):
        data_arg = _DATA.value
        if '.py' in data_arg:  # the subprocess runs from the repository root
          data_arg = os.path.abspath(data_arg)
        command.append(f'--data={data_arg}')
    if _SMALL.value:
      command.append('--small')
    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, *command], cwd=root, capture_output=True, text=True,
                         env=dict(os.environ))
    if out.returncode:
      raise SystemExit(f'{" ".join(command)} failed:\n{out.stderr[-3000:]}')
    made = workdir / table / 'table.md'
    lines = header + [f'(from `{" ".join(command)}`)', '',
                      made.read_text() if made.exists() else out.stdout]
  text = '\n'.join(lines) + '\n'
  (workdir / f'{table}.md').write_text(text)
  print(text)


if __name__ == '__main__':
  app.run(main)

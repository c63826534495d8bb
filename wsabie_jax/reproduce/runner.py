"""Runs a list of table rows (one config each) and writes the table: the
helper behind every compare script and launch/reproduce.py."""
from __future__ import annotations

import json
import pathlib
import shutil

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.api import configs, run

def base_config(data: str, small: bool = False) -> ml_collections.ConfigDict:
  """The WSABIE config a table runs on: 'corel5k', 'synthetic' (their `small`
  versions for tests), or any config file with its argument —
  'configs/wsabie_lear.py:espgame', 'configs/wsabie_folder.py:DATA_DIR' — so
  the papers' tables run on real data where it is available."""
  if data in ('corel5k', 'synthetic'):
    return configs.load(f'wsabie_{data}' + (':small' if small else ''))
  if small:
    raise ValueError('--small runs on corel5k or synthetic only')
  return config_lib.load(data)


def run_rows(rows: dict[str, ml_collections.ConfigDict], workdir) -> dict[str, dict]:
  """Trains each row's config from scratch in workdir/<row> (timed alike) and
  returns each row's test metrics."""
  results = {}
  for name, config in rows.items():
    run_dir = pathlib.Path(workdir) / name
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f'== {name}', flush=True)
    results[name] = run.train_and_evaluate(config, run_dir)
  return results


def write(workdir, text: str, results: dict) -> None:
  """workdir/table.md (the table as printed) and table.json (every figure)."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / 'table.md').write_text(text)
  (workdir / 'table.json').write_text(json.dumps(results, indent=2, sort_keys=True, default=str))
  print(text)

"""One paper table by its name ('000-4', '003-2', …): the runs behind it and
the table beside the paper's, written to <workdir>/<table>.md."""
from __future__ import annotations

import json
import pathlib

from wsabie_jax.benchmarks import suites
from wsabie_jax.reproduce import wsabie_tables, parts_tables, sampler_tables, skipgram_tables, rank_weights

TABLES = ('000-2', '000-4', '000-5', '000-7', '000-R1', '002-3', '002-5', '003-2', '003-4', '004-1', '004-3')
DATA_OF = {'000-R1': 'none (expectations; VSE-ens simulated on a random table)', '002-3': 'synthetic, WordNet mode (proxy images of objects and parts)',
           '002-5': 'synthetic, WordNet mode (proxy images of objects and parts)',
           '003-2': 'synthetic', '003-4': 'corel5k',
           '004-1': 'synthetic (timing only)', '004-3': 'synthetic with noisy word vectors'}


def reproduce(table: str, workdir, data: str = 'corel5k', small: bool = False) -> str:
  """`data` (corel5k, synthetic or configs/FILE.py:ARG) is for the 000-x tables;
  the others run on the data they were built for (DATA_OF)."""
  if table not in TABLES:
    raise ValueError(f'table {table!r} is not one of {TABLES}')
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  where = workdir / table
  if table in ('000-4', '000-5'):
    text = wsabie_tables.runs_table(table, where, data, small)
  elif table in ('000-2', '000-7'):
    text = wsabie_tables.baselines_table(where, data, (16, 32) if small else (32, 64, 128), small)
  elif table == '000-R1':  # Remark 1's weighting under each rank estimate
    text = rank_weights.table(where, small)
  elif table in ('002-3', '002-5'):
    text = parts_tables.run(where, small)
  elif table in ('003-2', '003-4'):  # both protocols: paper 003's, then this project's
    text = (sampler_tables.run(where / 'paper', DATA_OF[table], small=small, paper=True) + '\n'
            + sampler_tables.run(where / 'ours', DATA_OF[table], small=small))
  elif table == '004-3':
    text = skipgram_tables.table(where, small=small)
  else:  # 004-1: seconds per epoch
    rows = suites.skipgram_epoch(small)
    (workdir / f'{table}.json').write_text(json.dumps(rows, indent=2))
    names = [k for k in rows[0] if k not in ('labels', 'images')]
    text = '\n'.join(['| labels | images | ' + ' | '.join(names) + ' |',
                      '|---|---|' + '---|' * len(names)]
                     + [f"| {r['labels']} | {r['images']} | "
                        + ' | '.join(f'{r[n]:.2f}' for n in names) + ' |' for r in rows]) + '\n'
  used = DATA_OF.get(table, data)
  split = '' if table == '000-R1' else ', test split'
  text = (f'Table {table}; our data: {used}{" (small)" if small else ""}{split}.\n\n'
          + text)
  (workdir / f'{table}.md').write_text(text)
  return text

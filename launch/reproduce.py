"""Runs the configs behind one of the papers' tables and writes ours beside the paper's.

  python launch/reproduce.py --table=000-4 --workdir=runs/reproduce [--data=corel5k] [--small]

Each table is one function of wsabie_jax/reproduce/ (wsabie_tables, parts_tables,
sampler_tables, skipgram_tables, rank_weights; a timing table from
benchmarks/suites.py), the same ones launch/baselines.py, compare_parts.py,
compare_samplers.py, compare_skipgram.py and benchmark.py call. On this machine
they run on the synthetic data and Corel5k; for the 000-x tables `--data`
picks which, or names a config file and its argument so that the same command
runs them on the papers' real data: `--data=configs/wsabie_lear.py:espgame,DIR`
(LEAR's iccv09 files in DIR, prepared through tfds) or
`--data=configs/wsabie_folder.py:DATA_DIR` (a featurised folder of images).
Writes <workdir>/<table>.md.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
from absl import flags, logging

from wsabie_jax.api import cli
from wsabie_jax.reproduce import by_name

_TABLE = flags.DEFINE_enum('table', None, by_name.TABLES, 'Paper-table, e.g. 000-4.',
                           required=True)
_WORKDIR = flags.DEFINE_string('workdir', 'runs/reproduce', 'Where runs and tables go.')
_DATA = flags.DEFINE_string('data', 'corel5k', 'corel5k, synthetic or a config file with its '
                            'argument (configs/wsabie_lear.py:espgame) for the 000-x tables.')
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  print(by_name.reproduce(_TABLE.value, _WORKDIR.value, _DATA.value, _SMALL.value))


if __name__ == '__main__':
  cli.main(main)

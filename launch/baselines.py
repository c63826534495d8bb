"""Paper 000 Table 2 (baselines) and Table 7 (ensembles) on Corel5k or the synthetic data.

  python launch/baselines.py --data=corel5k --workdir=runs/baselines_corel5k
  python launch/baselines.py --data=synthetic --workdir=runs/baselines_synthetic

Rows: approximate k-NN (random-projection tree, depth p), exact k-NN, One-vs-Rest
(Passive-Aggressive), PAMIR-IA, WSABIE (the data's config), and ensembles of
WSABIE models of different D with weights fit on validation. Each baseline's
hyper-parameters (C, epochs, k, p) are chosen on the validation split; the
test split is scored once. Writes table.md and table.json to the workdir.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
from absl import flags, logging

from wsabie_jax.api import cli
from wsabie_jax.reproduce import wsabie_tables

_DATA = flags.DEFINE_string('data', 'corel5k', 'corel5k, synthetic or a config file with its '
                            'argument (configs/wsabie_lear.py:espgame) for the 000-x tables.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the table go.', required=True)
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')
_DIMS = flags.DEFINE_list('dims', ['32', '64', '128'], 'Embedding sizes of the ensemble members.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  wsabie_tables.baselines_table(_WORKDIR.value, _DATA.value, [int(d) for d in _DIMS.value],
                           _SMALL.value)


if __name__ == '__main__':
  cli.main(main)

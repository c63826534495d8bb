"""Paper 003 Tables 2 and 4: uniform WARP, VSE-ens (hinge), VSE-ens + WARP and AUC.

  python launch/compare_samplers.py --data=synthetic --workdir=runs/samplers_synthetic
  python launch/compare_samplers.py --data=corel5k --workdir=runs/samplers_corel5k
  python launch/compare_samplers.py --data=corel5k --paper --workdir=runs/samplers_corel5k_paper
  python launch/compare_samplers.py --data=synthetic --num_labels=100000 --seeds=0,1,2 \
      --rows=warp,vse_warp --workdir=runs/samplers_100k

Trains each row's config (configs/samplers.py:<row>,<data>) in turn, from
scratch, with the same budget and validation schedule, then writes to the
workdir: table.md (speed-ups next to the paper's and test p@5, r@5, MAP, AUC),
table.json, and paper 003 Fig. 1 for uniform WARP (fig1_draws_per_update.svg
and .csv: the draws sequential uniform WARP needs per update, over training).
With several --seeds the rows run once a training seed (the data stay the
same) and a second table gives each row's speed-up over them: median, range.
"""
from absl import flags, logging

from wsabie_jax.api import cli
from wsabie_jax.reproduce import sampler_tables
from wsabie_jax.methods import wsabie

_DATA = flags.DEFINE_enum('data', 'synthetic', ['synthetic', 'corel5k'], 'Which data set.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the table go.', required=True)
_ROWS = flags.DEFINE_list('rows', list(wsabie.SAMPLER_ROWS), 'Rows to run (warp is the reference).')
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')
_PAPER = flags.DEFINE_bool('paper', False, "Paper 003's protocol (configs/samplers.py paper).")
_SEEDS = flags.DEFINE_list('seeds', ['0'], 'Training seeds (config.seed) to run the rows under.')
_NUM_LABELS = flags.DEFINE_integer('num_labels', 0, "Synthetic data: Y (0: the config's 10,000).")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  sampler_tables.run(_WORKDIR.value, _DATA.value, _ROWS.value, _SMALL.value, _PAPER.value,
               seeds=tuple(int(s) for s in _SEEDS.value), num_labels=_NUM_LABELS.value)


if __name__ == '__main__':
  cli.main(main)

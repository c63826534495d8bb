"""Paper 002 Tables 3, 5 and 6 on the WordNet-mode synthetic data.

  python launch/compare_parts.py --workdir=runs/parts [--small]

Trains the four models of §6.2 (configs/parts_synthetic.py: Shared / Unshared,
selected on validation Part-Object MAP scored Image-Word or Image) and writes
to the workdir table.md (Table 3: the three tasks; Table 5: Part-Object
Labeling among all relation couples on test quadruplets of relations training
never saw, with the WordNet-offset models), table.json, and the nearest
labels of a few synsets in the Shared and Unshared spaces (Table 6).
"""
from absl import flags, logging

from wsabie_jax.api import cli
from wsabie_jax.reproduce import parts_tables

_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the tables go.', required=True)
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')
_SVM = flags.DEFINE_bool('svm', True, 'Also the one-vs-rest linear (SVM-like) baseline row.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  parts_tables.run(_WORKDIR.value, _SMALL.value, _SVM.value)


if __name__ == '__main__':
  cli.main(main)

"""Paper 004's comparisons on the synthetic data: Tables 2–3 and the Fig. 2 sweeps.

  python launch/compare_skipgram.py --study=table --workdir=runs/skipgram_table
  python launch/compare_skipgram.py --study=sweep --workdir=runs/skipgram_sweep

table  every row of configs/skipgram_synthetic.py (Fast0Tag, Fixed WV, full
       cross-entropy, each full and sampled) with 20% of the labels held out:
       test P/R/F1@5 on the seen labels (Table 3 style) and zero-shot P/R/F1@5
       on the held-out ones, with their vectors as training left them and after
       the OOV pass (Table 2 style).
sweep  the proposed objective at P ∈ {1, 2, 5, 10} × N ∈ {1, 10, 100}
       (configs/skipgram_synthetic.py:proposed,sweep): test F1@5 (Fig. 2(c), (d)).
Writes table.md, table.json and, for the sweep, fig2c_positives.svg and
fig2d_negatives.svg to the workdir. Per-class P and R are averaged over the
classes present in the test labels, F1 is their harmonic mean (as the tagging
papers report); "overall" pools all predictions.
"""
from absl import flags, logging

from wsabie_jax.api import cli
from wsabie_jax.reproduce import skipgram_tables
from wsabie_jax.methods import skipgram

_STUDY = flags.DEFINE_enum('study', 'table', ['table', 'sweep'], 'Which comparison.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Where the runs and the table go.', required=True)
_SMALL = flags.DEFINE_bool('small', False, 'Test-sized runs.')
_ROWS = flags.DEFINE_list('rows', list(skipgram.ROWS), 'Table rows to run.')
_POSITIVES = flags.DEFINE_list('positives', ['1', '2', '5', '10'], 'Sweep: values of P.')
_NEGATIVES = flags.DEFINE_list('negatives', ['1', '10', '100'], 'Sweep: values of N.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  if _STUDY.value == 'table':
    skipgram_tables.table(_WORKDIR.value, _ROWS.value, _SMALL.value)
  else:
    skipgram_tables.sweep(_WORKDIR.value, [int(p) for p in _POSITIVES.value],
                   [int(n) for n in _NEGATIVES.value], _SMALL.value)


if __name__ == '__main__':
  cli.main(main)

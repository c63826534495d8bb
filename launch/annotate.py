"""Prints the top-k label names for each example of a data file.

  python launch/annotate.py --workdir=/tmp/run --input=FILE [--k=10]
  python launch/annotate.py --workdir=/tmp/run --images=photo.png,folder/  # featurised runs

With --all_words (skip-gram workdirs) every word of the word table is ranked,
words never seen in training included (placed by the OOV pass). FILE is in
the training data's format: a Mulan .arff (labels XML from the
run's config) or a libsvm/XMC text file; its labels, if any, are shown as
`true:` for comparison, and examples without labels are annotated too.
--images (runs on a folder featurised by launch/featurize.py) takes image
files and folders and featurises them with the run's codebook first.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import os

from absl import app, flags, logging

from wsabie_jax.api import annotate, cli, run

_WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
_INPUT = flags.DEFINE_string('input', None, 'Data file to annotate.')
_IMAGES = flags.DEFINE_string('images', None, 'Image files or folders (comma-separated) to '
                              'annotate; the run must be on featurised images.')
_K = flags.DEFINE_integer('k', 10, 'How many labels to print per example.')
_ALLOW_DATA_CHANGE = flags.DEFINE_bool('allow_data_change', False, 'Use a label XML or '
                                       'codebook that changed since the run was trained.')
_ALL_WORDS = flags.DEFINE_bool('all_words', False,
                               'Skip-gram workdirs: rank every word of the word table after the '
                               'OOV pass (words.npy), not only the training tags.')


def main(argv):
  del argv
  cli.use_compilation_cache()
  logging.set_verbosity(logging.WARNING)
  if (_INPUT.value is None) == (_IMAGES.value is None):
    raise app.UsageError('give exactly one of --input (a data file) and --images')
  if _K.value < 1:
    raise app.UsageError(f'--k={_K.value}: how many labels to print, at least 1')
  if os.path.isdir(_WORKDIR.value):  # (else its one-line error comes at once)
    cli.say(f'annotating {_INPUT.value or _IMAGES.value} with {_WORKDIR.value} (reading the run; '
            'a first run on this machine compiles)')
  # Only what annotating reads must be as trained: the label XML, the codebook.
  restored = run.Restored(_WORKDIR.value, reads=('data.labels_path', 'data.featurized_dir'),
                          allow_data_change=_ALLOW_DATA_CHANGE.value)
  if _IMAGES.value:
    ds, titles = annotate.read_images(_IMAGES.value, restored.config, restored.vocab)
  else:
    ds, titles = annotate.read_input(_INPUT.value, restored.config, restored.vocab), None
  for title, predicted, truth in annotate.annotate(restored, ds, _K.value, titles,
                                                   _ALL_WORDS.value):
    line = ', '.join(f'{name} ({score:.2f})' for name, score in predicted)
    print(f'{title}: {line}' + (f'   [true: {", ".join(truth)}]' if truth else ''))


if __name__ == '__main__':
  cli.main(main)

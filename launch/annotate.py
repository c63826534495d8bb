"""Prints the top-k label names for each example of a data file.

  python launch/annotate.py --workdir=/tmp/run --input=FILE [--k=10]

With --all_words (skip-gram workdirs) every word of the word table is ranked,
words never seen in training included (placed by the OOV pass). FILE is in
the training data's format: a Mulan .arff (labels XML from the
run's config) or a libsvm/XMC text file; its labels, if any, are shown as
`true:` for comparison, and examples without labels are annotated too.
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging
import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax import metrics, workdir as workdir_lib
from wsabie_jax.data import SparseDataset, batching, libsvm, mulan, preprocess

_WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
_INPUT = flags.DEFINE_string('input', None, 'Data file to annotate.', required=True)
_K = flags.DEFINE_integer('k', 10, 'How many labels to print per example.')
_ALL_WORDS = flags.DEFINE_bool('all_words', False,
                               'Skip-gram workdirs: rank every word of the word table after the '
                               'OOV pass (words.npy), not only the training tags.')


def read_input(path: str, config, vocab: dict) -> SparseDataset:
  if path.endswith('.arff'):
    ds = mulan.read_arff(path, config.data.labels_path, skip_empty=False)
  else:
    num_features = vocab['num_features'] - (1 if config.data.get('bias_feature', 0.0) else 0)
    ds = libsvm.read_libsvm(path, num_features=num_features, label_names=vocab['label_names'],
                            feature_base=config.data.get('feature_base', 0), skip_empty=False)
  return preprocess(ds, config.data)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  config = workdir_lib.load_config(_WORKDIR.value)
  vocab = workdir_lib.load_vocabulary(_WORKDIR.value)
  embed, labels_YxD = workdir_lib.load_scorer(_WORKDIR.value, config, vocab)
  ds = read_input(_INPUT.value, config, vocab)
  if ds.num_features != vocab['num_features']:
    raise SystemExit(f'{_INPUT.value}: {ds.num_features} features, the model has {vocab["num_features"]}')
  names = vocab['label_names'][:labels_YxD.shape[0]]
  if _ALL_WORDS.value:  # open vocabulary (paper 004 §2.1): tags, held-out labels, text-only words
    words = pathlib.Path(_WORKDIR.value) / 'words.npy'
    if not words.exists():
      raise SystemExit(f'{words} not found: --all_words needs a skip-gram workdir (config.method)')
    labels_YxD = jnp.asarray(np.load(words))
    names = json.loads(words.with_suffix('.json').read_text())
  padded = batching.pad_images(ds)
  example = 0
  for feat_idx, feat_val, _, real in batching.eval_batches(padded, config.eval.batch_size):
    image = embed(feat_idx, feat_val)
    _, top, scores = jax.device_get(metrics.rank_and_top_k(
        image, labels_YxD, jnp.full((len(feat_idx), 1), -1), k=min(_K.value, len(names)),
        score_kind=config.model.score, chunk=config.eval.label_chunk))
    for row in range(real):
      predicted = ', '.join(f'{names[i]} ({s:.2f})' for i, s in zip(top[row], scores[row]))
      truth = ', '.join(names[i] for i in ds.labels(example))
      print(f'{example}: {predicted}' + (f'   [true: {truth}]' if truth else ''))
      example += 1


if __name__ == '__main__':
  app.run(main)

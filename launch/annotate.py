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
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging
import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax import metrics, workdir as workdir_lib
from wsabie_jax import visual_terms
from wsabie_jax.data import SparseDataset, batching, dataset, image_folder, libsvm, mulan, preprocess

_WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
_INPUT = flags.DEFINE_string('input', None, 'Data file to annotate.')
_IMAGES = flags.DEFINE_string('images', None, 'Image files or folders (comma-separated) to '
                              'annotate; the run must be on featurised images.')
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


def read_images(spec: str, config, vocab: dict) -> tuple[SparseDataset, list[str]]:
  """Image files → bags of visual terms with the codebook the run was trained on."""
  if not config.data.get('featurized_dir'):
    raise SystemExit('--images needs a run on featurised images (configs/wsabie_folder.py)')
  entries, dropped = image_folder.screen_images([(p, []) for p in image_folder.image_paths(spec)], '',
                                                image_folder.FeaturizeSettings.max_pixels,
                                                drop_duplicates=False)
  for path, why in dropped.items():
    print(f'{path}: skipped ({why})', file=sys.stderr)
  paths = [p for p, _ in entries]
  if not paths:
    raise SystemExit(f'no images to annotate in {spec}')
  featurizer, codebook = image_folder.load_featurizer(config.data.featurized_dir)
  rows = visual_terms.histograms(featurizer.codes(paths, codebook))
  ds = dataset.from_lists(rows, [np.zeros(0, np.int64)] * len(rows), len(codebook),
                          vocab['label_names'])
  return preprocess(ds, config.data), paths


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  config = workdir_lib.load_config(_WORKDIR.value)
  vocab = workdir_lib.load_vocabulary(_WORKDIR.value)
  embed, labels_YxD = workdir_lib.load_scorer(_WORKDIR.value, config, vocab)
  if (_INPUT.value is None) == (_IMAGES.value is None):
    raise SystemExit('give exactly one of --input (a data file) and --images')
  if _IMAGES.value:
    ds, titles = read_images(_IMAGES.value, config, vocab)
  else:
    ds, titles = read_input(_INPUT.value, config, vocab), None
  if ds.num_features != vocab['num_features']:
    raise SystemExit(f'{_INPUT.value or _IMAGES.value}: {ds.num_features} features, '
                     f'the model has {vocab["num_features"]}')
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
      title = titles[example] if titles else example
      print(f'{title}: {predicted}' + (f'   [true: {truth}]' if truth else ''))
      example += 1


if __name__ == '__main__':
  app.run(main)

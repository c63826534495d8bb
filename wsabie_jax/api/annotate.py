"""Top-k labels for new examples with a trained workdir (launch/annotate.py):
examples read in the training data's format, or image files featurised with
the run's codebook."""
from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import metrics
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.data import DataError, SparseDataset, batching, dataset, formats, preprocess
from wsabie_jax.data.standardize import Standardization
from wsabie_jax.data import settings as data_settings
from wsabie_jax.api.run import Restored
from wsabie_jax.features import image_folder, visual_terms


def read_input(path: str, config, vocab: dict) -> SparseDataset:
  """`path` in the training data's format (data/formats.py), checked against
  the run: its kind, feature ids within the run's features and label ids
  within its labels (each a DataError naming the file and line)."""
  if not os.path.isfile(path):
    raise DataError(path, None, 'no such file' if not os.path.exists(path) else 'not a file')
  data = data_settings.of(config.data)
  num_features = vocab['num_features'] - (1 if data.bias_feature else 0)
  if not isinstance(data, data_settings.FileData):  # generated: libsvm text, ids from 0
    data = data_settings.FileData(kind='libsvm', train_path='-', test_path='-')
  if formats.of_path(path) != data.kind:
    raise DataError(path, None, f'the run was trained on {config.data.kind} data: --input must '
                    f'be {formats.FORMATS[data.kind].description}')
  ds = formats.read(data, path, num_features, vocab['label_names'], skip_empty=False)
  if ds.num_images == 0:
    raise DataError(path, None, 'no examples to annotate')
  ds = preprocess(ds, config.data, _shift(config, vocab))
  if ds.num_features != vocab['num_features']:
    raise DataError(path, None, f'{ds.num_features:,} features, the run was trained on '
                    f'{vocab["num_features"]:,}')
  if ds.label_names != vocab['label_names'][:ds.num_labels]:
    raise DataError(path, None, 'its labels are not the run\'s (another data set?)')
  return ds


def _shift(config, vocab: dict) -> Standardization | None:
  """data.standardize's statistics the run saved in its vocabulary.json."""
  shift = Standardization.from_json(vocab.get('standardized'))
  if shift is None and config.data.get('standardize') in ('center', 'z'):
    raise ConfigError(f"the run's config has data.standardize={config.data.standardize!r} but "
                      'its vocabulary.json holds no statistics to apply (written before the '
                      'option?): evaluate it on its data, or train it again')
  return shift


def read_images(spec: str, config, vocab: dict) -> tuple[SparseDataset, list[str]]:
  """Image files → bags of visual terms with the codebook the run was trained on."""
  data = data_settings.of(config.data)
  if not isinstance(data, data_settings.FileData) or not data.featurized_dir:
    raise ConfigError('--images needs a run on featurised images (configs/wsabie_folder.py); '
                      'give this run --input=FILE in its training data\'s format')
  entries, dropped = image_folder.screen_images([(p, []) for p in image_folder.image_paths(spec)], '',
                                                image_folder.FeaturizeSettings.max_pixels,
                                                drop_duplicates=False)
  for path, why in dropped.items():
    print(f'{path}: skipped ({why})', file=sys.stderr)
  paths = [p for p, _ in entries]
  if not paths:
    raise DataError(spec, None, 'no readable images to annotate')
  featurizer, codebook = image_folder.load_featurizer(data.featurized_dir)
  rows = visual_terms.histograms(featurizer.codes(paths, codebook))
  ds = dataset.from_lists(rows, [np.zeros(0, np.int64)] * len(rows), len(codebook),
                          vocab['label_names'])
  return preprocess(ds, config.data, _shift(config, vocab)), paths


def annotate(restored: Restored, ds: SparseDataset, k: int, titles: list[str] | None = None,
             all_words: bool = False) -> Iterator[tuple[str, list[tuple[str, float]], list[str]]]:
  """(title, [(label, score)] best first, true labels) for each example of `ds`.

  all_words (skip-gram workdirs): rank every word of the table the OOV pass
  left (words.npy), not only the training tags (paper 004 §2.1).
  """
  config, vocab = restored.config, restored.vocab
  embed, labels_YxD = restored.scorer()
  names = vocab['label_names'][:labels_YxD.shape[0]]
  if all_words:
    words = pathlib.Path(restored.workdir) / 'words.npy'
    if not words.exists():
      raise ConfigError(f'{words} not found: --all_words needs a skip-gram workdir')
    labels_YxD = jnp.asarray(np.load(words))
    names = json.loads(words.with_suffix('.json').read_text())
  metrics.require_finite(labels_YxD, 'label embeddings')
  # Batches come shortest image first (batching.eval_batches): the top k of
  # every image is kept, then given in the input's order.
  kk = min(k, len(names))
  top_nxk, score_nxk = np.zeros((ds.num_images, kk), np.int64), np.zeros((ds.num_images, kk))
  for b in batching.eval_batches(batching.pad_images(ds), config.eval.batch_size):
    image_BxD = embed(b.feat_idx_BxF, b.feat_val_BxF)
    metrics.require_finite(image_BxD, 'image embeddings')
    _, top, scores = jax.device_get(metrics.rank_and_top_k(
        image_BxD, labels_YxD, jnp.full((len(b.feat_idx_BxF), 1), -1),
        k=kk, score_kind=config.model.score, chunk=config.eval.label_chunk))
    rows = b.rows_B[:b.num_real]
    top_nxk[rows], score_nxk[rows] = top[:b.num_real], scores[:b.num_real]
  for example in range(ds.num_images):
    yield (titles[example] if titles else str(example),
           [(names[i], float(s)) for i, s in zip(top_nxk[example], score_nxk[example])],
           [names[i] for i in ds.labels(example)])

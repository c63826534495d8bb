"""Top-k labels for new examples with a trained workdir (launch/annotate.py):
examples read in the training data's format, or image files featurised with
the run's codebook."""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import metrics
from wsabie_jax.data import SparseDataset, batching, dataset, libsvm, mulan, preprocess
from wsabie_jax.experiments.run import Restored
from wsabie_jax.features import image_folder, visual_terms


def read_input(path: str, config, vocab: dict) -> SparseDataset:
  if path.endswith('.arff'):
    ds = mulan.read_arff(path, config.data.labels_path, skip_empty=False)
  else:
    num_features = vocab['num_features'] - (1 if config.data.get('bias_feature', 0.0) else 0)
    ds = libsvm.read_libsvm(path, num_features=num_features, label_names=vocab['label_names'],
                            feature_base=config.data.get('feature_base', 0), skip_empty=False)
  if ds.num_images == 0:
    raise ValueError('no examples to annotate')
  return preprocess(ds, config.data)


def read_images(spec: str, config, vocab: dict) -> tuple[SparseDataset, list[str]]:
  """Image files → bags of visual terms with the codebook the run was trained on."""
  if not config.data.get('featurized_dir'):
    raise ValueError('--images needs a run on featurised images (configs/wsabie_folder.py)')
  entries, dropped = image_folder.screen_images([(p, []) for p in image_folder.image_paths(spec)], '',
                                                image_folder.FeaturizeSettings.max_pixels,
                                                drop_duplicates=False)
  for path, why in dropped.items():
    print(f'{path}: skipped ({why})', file=sys.stderr)
  paths = [p for p, _ in entries]
  if not paths:
    raise ValueError(f'no images to annotate in {spec}')
  featurizer, codebook = image_folder.load_featurizer(config.data.featurized_dir)
  rows = visual_terms.histograms(featurizer.codes(paths, codebook))
  ds = dataset.from_lists(rows, [np.zeros(0, np.int64)] * len(rows), len(codebook),
                          vocab['label_names'])
  return preprocess(ds, config.data), paths


def annotate(restored: Restored, ds: SparseDataset, k: int, titles: list[str] | None = None,
             all_words: bool = False) -> Iterator[tuple[str, list[tuple[str, float]], list[str]]]:
  """(title, [(label, score)] best first, true labels) for each example of `ds`.

  all_words (skip-gram workdirs): rank every word of the table the OOV pass
  left (words.npy), not only the training tags (paper 004 §2.1).
  """
  config, vocab = restored.config, restored.vocab
  if ds.num_features != vocab['num_features']:
    raise ValueError(f'{ds.num_features} features, the model has {vocab["num_features"]}')
  embed, labels_YxD = restored.scorer()
  names = vocab['label_names'][:labels_YxD.shape[0]]
  if all_words:
    words = pathlib.Path(restored.workdir) / 'words.npy'
    if not words.exists():
      raise ValueError(f'{words} not found: --all_words needs a skip-gram workdir (config.method)')
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

"""The objects-and-parts method for the training loop (config.method='parts', paper 002).

Data: any synset-labelled feature set (config.data; label names are WordNet
synset names such as 'car.n.01'), by default the synthetic data in WordNet
mode. Its images are split three ways and paired through WordNet's part-of
relations (parts/proxy.py); training draws quadruplets, validation and test
use fixed sets. Validation reports every task under both scorings (iw_*,
i_*), so config.train.select_metric picks the paper's model selection
(Part-Object Labeling on validation: iw_pair_map or i_pair_map). Test adds
the WordNet-offset scoring (io_*, §6.5) and writes Table 6's nearest labels
to workdir/nearest_labels.json. Annotation (launch/annotate.py) ranks every
label for an image by f_I.
"""
from __future__ import annotations

import json
import logging
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax.baselines import linear
from wsabie_jax.config import from_config, to_config
from wsabie_jax.data import settings as data_config
from wsabie_jax.training import settings as run_config
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.core import evaluation
from wsabie_jax.data import dataset
from wsabie_jax.methods import common
from wsabie_jax.parts import evaluation as parts_eval
from wsabie_jax.parts import proxy
from wsabie_jax.parts import step as parts
from wsabie_jax.data import wordnet
from wsabie_jax.training import parallel
from wsabie_jax.training.method import Method

log = logging.getLogger('wsabie_jax')


def base_config(data: ml_collections.ConfigDict | None = None, **sections) -> ml_collections.ConfigDict:
  """Paper 002's defaults: sections model, loss, optim (parts/settings.py) and proxy
  (parts/proxy.py) on synset-labelled data (the WordNet-mode synthetic default)."""
  if data is None:
    data = data_config.synthetic_data(vocabulary='wordnet', num_labels=1000, num_features=5000,
                                      signal=0.5)
    data.update(num_train=60_000, num_test=0)
  data.validation_fraction = 0.0   # the proxy builder splits the images itself
  train = run_config.train(max_steps=6000, eval_every_steps=500, patience=6,
                           select_metric='iw_pair_map')
  return run_config.assemble('parts', parts.PartsConfig.defaults(), data,
                             proxy=to_config(proxy.ProxyConfig), **{'train': train, **sections})


def parts_config(config: ml_collections.ConfigDict, num_labels: int) -> parts.PartsConfig:
  return parts.PartsConfig.read(config, num_labels=num_labels)


def check_config(config: ml_collections.ConfigDict) -> dict:
  return {**parts_config(config, num_labels=2).by_section(), 'proxy': _proxy_settings(config)}


def _proxy_settings(config) -> proxy.ProxyConfig:
  return from_config(proxy.ProxyConfig, config.proxy, 'config.proxy')


def proxy_data(config: ml_collections.ConfigDict) -> proxy.ProxyData:
  train, valid, test = common.load_splits(config)
  images = dataset.concat([train, valid, test])
  relations = wordnet.pairs_among(images.label_names)
  if not relations:
    raise ValueError('no part-of relation among the data\'s labels: parts needs labels named '
                     'by WordNet synsets (e.g. car.n.01)')
  settings = _proxy_settings(config)
  return proxy.build(images, relations, min_images=settings.min_images,
                     seed=config.data.split_seed, unseen_fraction=settings.unseen_fraction)


def fixed_quadruplets(config: ml_collections.ConfigDict, data: proxy.ProxyData, split: str) -> dict:
  """The split's fixed evaluation set (config.proxy.num_valid / num_test
  quadruplets): validation from the relations training sees (model selection
  never looks at the unseen ones), test from all of them (§6.5 needs both)."""
  salt = {'valid': 1, 'test': 2}[split]
  size = getattr(_proxy_settings(config), f'num_{split}')
  relations = data.seen_Rx2 if split == 'valid' else data.relations_Rx2
  return proxy.QuadrupletStream(data.splits[split], relations, size, config.seed + salt).batch(0)


def _tables(cfg: parts.PartsConfig, state):
  return state.params.V_dxD, state.params.W_KxD, parts.image_table(cfg, state.params)


def _test_metrics(config, cfg, data: proxy.ProxyData, state, quads: dict) -> dict:
  """Every task under Image-Word, Image and WordNet-offset scoring on the test
  quadruplets of relations training saw (Table 3); on those of relations it
  never saw, the same prefixed `unseen_` (§6.5, Table 5)."""
  offset = _proxy_settings(config).offset
  kw = dict(offset=offset, scorings=('iw', 'i', 'io'), couples_Cx2=data.relations_Rx2)
  is_unseen = data.is_unseen(quads['obj_label_B'], quads['part_label_B'])
  out = {}
  for prefix, rows in (('', np.flatnonzero(~is_unseen)), ('unseen_', np.flatnonzero(is_unseen))):
    if len(rows):
      sub = {k: v[rows] for k, v in quads.items()}
      got = parts_eval.evaluate(*_tables(cfg, state), sub, cfg.model.alpha, data.seen_Rx2, **kw)
      out.update({f'{prefix}{k}': v for k, v in got.items()})
  out['seen_test_quadruplets'] = int((~is_unseen).sum())
  out['unseen_test_quadruplets'] = int(is_unseen.sum())
  return out


def build(config: ml_collections.ConfigDict, mesh) -> Method:
  if jax.process_count() > 1:  # its state would live on one host's device, unsaveable by the rest
    raise ConfigError(f"method='parts' trains on one device: run it as one process, not "
                      f'{jax.process_count()} (wsabie and skipgram train on several hosts)')
  if mesh.devices.size > 1:
    log.info('method=parts runs on one device')
  data = proxy_data(config)
  train = data.splits['train']
  cfg = parts_config(config, train.num_labels)
  stream = proxy.QuadrupletStream(train, data.seen_Rx2, config.train.batch_size, config.seed)
  valid_quads = fixed_quadruplets(config, data, 'valid')
  test_quads = fixed_quadruplets(config, data, 'test')

  def validate(state):
    return parts_eval.evaluate(*_tables(cfg, state), valid_quads, cfg.model.alpha,
                               scorings=('iw', 'i'))

  def test(state, workdir, best=None) -> dict:
    out = _test_metrics(config, cfg, data, state, test_quads)
    queries = [n for n in _proxy_settings(config).nearest_queries if n in train.label_names]
    if queries and jax.process_index() == 0:
      near = {'W': parts_eval.nearest_labels(state.params.W_KxD, train.label_names, queries)}
      if not cfg.model.shared:
        near['U'] = parts_eval.nearest_labels(state.params.U_KxD, train.label_names, queries)
      (pathlib.Path(workdir) / 'nearest_labels.json').write_text(json.dumps(near, indent=1))
    out.update(relations=len(data.relations_Rx2), unseen_relations=len(data.unseen_Rx2),
               dropped_relations=data.dropped_relations,
               test_quadruplets=len(test_quads['obj_label_B']))
    return out

  names = [f'{s}_{t}_{m}' for s in ('iw', 'i') for t in ('pair', 'triplet')
           for m in ('p@1', 'p@10', 'map', 'mean_rank')] + ['annot_p@1', 'annot_p@10', 'annot_map']
  sizes = {k: v.num_images for k, v in data.splits.items()}
  description = (f'{sizes} images, {train.num_labels} synsets, {len(data.relations_Rx2)} part-of '
                 f'relations in every split ({data.dropped_relations} dropped)')
  return Method(
      init_state=lambda: parts.init_state(jax.random.PRNGKey(config.seed), cfg,
                                          train.num_features),
      stream=stream, mesh=parallel.make_mesh(1, mesh.devices.flat), validate=validate, test=test,
      select_metrics=frozenset(names),
      vocabulary={**common.vocabulary(train),
                  'relations': np.asarray(data.relations_Rx2).tolist()},
      description=description, config=config,
      pure_step=lambda state, batch: parts.train_step(cfg, state, batch))


def fit(config: ml_collections.ConfigDict) -> tuple[ml_collections.ConfigDict, dict]:
  """Fits nothing to the data: (the config, {})."""
  return config, {}


def like_state(config: ml_collections.ConfigDict, vocab: dict) -> parts.PartsState:
  """A state shaped like a workdir's checkpoints (from its vocabulary.json), to restore into."""
  cfg = parts_config(config, len(vocab['label_names']))
  return parts.init_state(jax.random.PRNGKey(config.seed), cfg, vocab['num_features'])


def scorer(config: ml_collections.ConfigDict, vocab: dict, state, workdir=None):
  """(embed_fn, labels_KxD) for annotation: f_I(I, L) = V Φ(I) · T_L over every
  synset (T = W for Shared models, U for Unshared)."""
  cfg = parts_config(config, len(vocab['label_names']))
  V = state.params.V_dxD
  return (lambda i, v: evaluation.embed(V, i, v)), parts.image_table(cfg, state.params)


def evaluate(config: ml_collections.ConfigDict, vocab: dict, state, split: str,
             baseline: bool, workdir=None) -> dict:
  """The three tasks of §6.2 on the split's fixed quadruplets (launch/evaluate.py);
  there is no frequency baseline for them (`baseline` is ignored)."""
  data = proxy_data(config)
  cfg = parts_config(config, len(vocab['label_names']))
  quads = fixed_quadruplets(config, data, split)
  if split == 'valid':
    return parts_eval.evaluate(*_tables(cfg, state), quads, cfg.model.alpha,
                               scorings=('iw', 'i'))
  return _test_metrics(config, cfg, data, state, quads)


def svm_baseline(config: ml_collections.ConfigDict, grid=((0.01, 5), (0.1, 5), (1.0, 5))) -> dict:
  """Paper 002 Table 3's SVM row: one-vs-rest linear classifiers (Passive-Aggressive,
  baselines.py) on the training images, C and epochs chosen on validation
  annotation MAP; test annotation = triplet for a model without f_L."""
  data = proxy_data(config)
  quads = {split: fixed_quadruplets(config, data, split) for split in ('valid', 'test')}

  def annotation(W_dxY, q) -> dict:
    score = linear.linear_scores(W_dxY)
    ranks = [parts_eval.annotation_rank(score(q[f'{side}_idx_BxF'], q[f'{side}_val_BxF']),
                                        jnp.asarray(q[f'{side}_label_B']))
             for side in ('obj', 'part')]
    return parts_eval.rank_metrics(np.concatenate([np.asarray(r) for r in ranks]), 'svm_annot_')

  best = None
  for C, epochs in grid:
    W = linear.train_linear(data.splits['train'], 'ovr', C=C, epochs=epochs, seed=config.seed)
    got = annotation(W, quads['valid'])['svm_annot_map']
    if best is None or got > best[0]:
      best = (got, W, (C, epochs))
  test = quads['test']
  seen = np.flatnonzero(~data.is_unseen(test['obj_label_B'], test['part_label_B']))  # Table 3
  return {**annotation(best[1], {k: v[seen] for k, v in test.items()}),
          'svm_setting': str(best[2])}

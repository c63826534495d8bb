"""The objects-and-parts method for the training loop (config.method='parts', paper 002).

Data: any synset-labelled feature set (config.data; label names are WordNet
synset names such as 'car.n.01'), by default the synthetic data in WordNet
mode. Its images are split three ways and paired through WordNet's part-of
relations (data/proxy.py); training draws quadruplets, validation and test
use fixed sets. Validation reports every task under both scorings (iw_*,
i_*), so config.train.select_metric picks the paper's model selection
(Part-Object Labeling on validation: iw_pair_map or i_pair_map). Test adds
the WordNet-offset scoring (io_*, §6.5) and writes Table 6's nearest labels
to workdir/nearest_labels.json.
"""
from __future__ import annotations

import json
import logging
import pathlib

import jax
import ml_collections
import numpy as np

from wsabie_jax import methods, parts, parts_eval, wordnet
from wsabie_jax.data import dataset, load_splits, proxy

log = logging.getLogger('wsabie_jax')


def parts_config(config: ml_collections.ConfigDict, num_labels: int) -> parts.PartsConfig:
  return parts.PartsConfig(
      num_labels=num_labels, shared=config.model.shared, alpha=config.model.alpha,
      num_draws=config.loss.num_draws, margin=config.loss.margin, optimizer=config.optim.kind,
      learning_rate_V=config.optim.learning_rate_V, learning_rate_W=config.optim.learning_rate_W,
      max_norm=config.model.max_norm)


def proxy_data(config: ml_collections.ConfigDict) -> proxy.ProxyData:
  train, valid, test = load_splits(config.data)
  images = dataset.concat([train, valid, test])
  relations = wordnet.part_of_pairs(wordnet.load(), images.label_names)
  if not relations:
    raise ValueError('no part-of relation among the data\'s labels: parts needs labels named '
                     'by WordNet synsets (e.g. car.n.01)')
  return proxy.build(images, relations, min_images=config.parts.min_images,
                     seed=config.data.split_seed, unseen_fraction=config.parts.unseen_fraction)


def fixed_quadruplets(config: ml_collections.ConfigDict, data: proxy.ProxyData, split: str) -> dict:
  """The split's fixed evaluation set (config.parts.num_valid / num_test quadruplets)."""
  salt = {'valid': 1, 'test': 2}[split]
  return proxy.QuadrupletStream(data.splits[split], data.relations_Rx2, config.parts[f'num_{split}'],
                                config.seed + salt).batch(0)


def method(config: ml_collections.ConfigDict, mesh) -> methods.Method:
  if mesh.devices.size > 1:
    log.info('method=parts runs on one device')
  data = proxy_data(config)
  train = data.splits['train']
  cfg = parts_config(config, train.num_labels)
  stream = proxy.QuadrupletStream(train, data.seen_Rx2, config.train.batch_size, config.seed)
  valid_quads = fixed_quadruplets(config, data, 'valid')
  test_quads = fixed_quadruplets(config, data, 'test')
  tables = lambda state: (state.params.V_dxD, state.params.W_KxD,
                          parts.image_table(cfg, state.params))

  def validate(state):
    return parts_eval.evaluate(*tables(state), valid_quads, cfg.alpha, scorings=('iw', 'i'))

  def test(state, workdir) -> dict:
    out = parts_eval.evaluate(*tables(state), test_quads, cfg.alpha, data.seen_Rx2,
                              offset=config.parts.offset, scorings=('iw', 'i', 'io'),
                              couples_Cx2=data.relations_Rx2)
    if len(data.unseen_Rx2):  # §6.5: quadruplets of relations training never saw
      unseen = {tuple(r) for r in data.unseen_Rx2}
      rows = np.flatnonzero([(o, p) in unseen for o, p in zip(test_quads['obj_label_B'],
                                                                test_quads['part_label_B'])])
      sub = {k: v[rows] for k, v in test_quads.items()}
      got = parts_eval.evaluate(*tables(state), sub, cfg.alpha, data.seen_Rx2,
                                offset=config.parts.offset, scorings=('iw', 'i', 'io'),
                                couples_Cx2=data.relations_Rx2)
      out.update({f'unseen_{k}': v for k, v in got.items()})
      out['unseen_test_quadruplets'] = len(rows)
    queries = [n for n in config.parts.nearest_queries if n in train.label_names]
    if queries and jax.process_index() == 0:
      near = {'W': parts_eval.nearest_labels(state.params.W_KxD, train.label_names, queries)}
      if not cfg.shared:
        near['U'] = parts_eval.nearest_labels(state.params.U_KxD, train.label_names, queries)
      (pathlib.Path(workdir) / 'nearest_labels.json').write_text(json.dumps(near, indent=1))
    out.update(relations=len(data.relations_Rx2), unseen_relations=len(data.unseen_Rx2),
               dropped_relations=data.dropped_relations,
               test_quadruplets=len(test_quads['obj_label_B']))
    return out

  names = [f'{s}_{t}_{m}' for s in ('iw', 'i') for t in ('pair', 'triplet')
           for m in ('p@1', 'p@10', 'map')] + ['annot_p@1', 'annot_p@10', 'annot_map']
  sizes = {k: v.num_images for k, v in data.splits.items()}
  description = (f'{sizes} images, {train.num_labels} synsets, {len(data.relations_Rx2)} part-of '
                 f'relations in every split ({data.dropped_relations} dropped)')
  return methods.Method(
      init_state=lambda: parts.init_state(jax.random.PRNGKey(config.seed), cfg,
                                          train.num_features, config.model.dim,
                                          config.optim.adagrad_init),
      place=lambda s: s, stream=stream, train_step=parts.make_train_step(cfg),
      put=jax.device_put, validate=validate, test=test, select_metrics=frozenset(names),
      vocabulary={**methods.vocabulary(train), 'relations': np.asarray(data.relations_Rx2).tolist()},
      description=description)


def svm_baseline(config: ml_collections.ConfigDict, grid=((0.01, 5), (0.1, 5), (1.0, 5))) -> dict:
  """Paper 002 Table 3's SVM row: one-vs-rest linear classifiers (Passive-Aggressive,
  baselines.py) on the training images, C and epochs chosen on validation
  annotation MAP; test annotation = triplet for a model without f_L."""
  import jax.numpy as jnp
  from wsabie_jax import baselines
  data = proxy_data(config)
  quads = {split: fixed_quadruplets(config, data, split) for split in ('valid', 'test')}

  def annotation(W_dxY, q) -> dict:
    score = baselines.linear_scores(W_dxY)
    ranks = [parts_eval.annotation_rank(score(q[f'{side}_idx_BxF'], q[f'{side}_val_BxF']),
                                        jnp.asarray(q[f'{side}_label_B']))
             for side in ('obj', 'part')]
    return parts_eval.rank_metrics(np.concatenate([np.asarray(r) for r in ranks]), 'svm_annot_')

  best = None
  for C, epochs in grid:
    W = baselines.train_linear(data.splits['train'], 'ovr', C=C, epochs=epochs, seed=config.seed)
    got = annotation(W, quads['valid'])['svm_annot_map']
    if best is None or got > best[0]:
      best = (got, W, (C, epochs))
  return {**annotation(best[1], quads['test']), 'svm_setting': str(best[2])}

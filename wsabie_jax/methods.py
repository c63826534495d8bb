"""What the training loop needs from each method, assembled from a config:
WSABIE (here), the image–word skip-gram (paper 004, `skipgram_run.py`) or
objects and parts (paper 002, `parts_run.py`).

`config.method` picks one ('wsabie' when absent). A Method is plain data —
functions and values — so the loop in train.py is the same for all.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import ml_collections
import numpy as np

from wsabie_jax import evaluation, parallel, step as step_lib
from wsabie_jax.data import SparseDataset, batching, dataset, load_splits, pair_stream

METHODS = ('wsabie', 'skipgram', 'parts')


class Method(NamedTuple):
  init_state: Callable[[], Any]
  place: Callable[[Any], Any]            # a (restored) state onto the devices
  stream: Any                            # .batch(step), .num_examples, .position(step)
  train_step: Callable                   # (state, batch) -> (state, stats), jitted
  put: Callable                          # a host batch onto the devices
  validate: Callable[[Any], dict | None]  # state -> validation metrics (None: no valid split)
  test: Callable[[Any, Any], dict]       # (best state, workdir) -> test metrics
  select_metrics: frozenset              # what config.train.select_metric may name
  vocabulary: dict                       # the workdir's vocabulary.json
  description: str                       # the data, for the log


def method_name(config: ml_collections.ConfigDict) -> str:
  name = config.get('method', 'wsabie')
  if name not in METHODS:
    raise ValueError(f'config.method={name!r} is not one of {METHODS}')
  return name


def build(config: ml_collections.ConfigDict, mesh) -> Method:
  name = method_name(config)
  if name == 'parts':
    from wsabie_jax import parts_run
    return parts_run.method(config, mesh)
  train, valid, test = load_splits(config.data)
  if name == 'skipgram':
    from wsabie_jax import skipgram_run
    return skipgram_run.method(config, (train, valid, test), mesh)
  return wsabie(config, (train, valid, test), mesh)


def eval_kwargs(config, data) -> dict:
  return dict(score=config.model.score, ks=tuple(config.eval.ks), batch_size=config.eval.batch_size,
              chunk=config.eval.label_chunk, label_parents=data.label_parents, f1_k=config.eval.f1_k)


def vocabulary(ds) -> dict:
  return {'label_names': ds.label_names, 'num_features': ds.num_features,
          'label_parents': None if ds.label_parents is None else ds.label_parents.tolist(),
          'num_seen_labels': ds.num_seen_labels}


def seen_labels_only(ds: SparseDataset, train: SparseDataset) -> SparseDataset:
  """`ds` ranked over the labels training saw (all of them without a zero-shot hold-out)."""
  if train.num_seen_labels is None:
    return ds
  return dataset.select_labels(ds, np.arange(train.num_seen_labels))


def ranking_method(config, splits, scorer, on_validation, finish, **fields) -> Method:
  """validate/test for methods that rank labels for images (WSABIE, skip-gram):
  exact metrics over all labels (seen labels only under a zero-shot hold-out),
  the frequency baseline, then the method's own test extras (`finish`)."""
  train, valid, test = splits
  ev = eval_kwargs(config, train)
  padded_valid = batching.pad_images(valid)

  def validate(state):
    if valid.num_images == 0:
      return None
    return {**evaluation.evaluate_ranking(*scorer(state), padded_valid,
                                          limit=config.train.eval_subset, **ev),
            **on_validation(state)}

  def test_fn(state, workdir) -> dict:
    seen = seen_labels_only(test, train)
    padded = batching.pad_images(seen)
    kw = dict(ev, label_parents=seen.label_parents)
    result = evaluation.evaluate_ranking(*scorer(state), padded, **kw)
    baseline = evaluation.evaluate_frequency_baseline(
        train.label_frequencies()[:seen.num_labels], padded, **kw)
    result.update({f'freq_{k}': v for k, v in baseline.items() if k != 'num_images'})
    result.update(finish(state, test, ev, workdir))
    result['skipped_empty'] = train.skipped_empty + test.skipped_empty
    return result

  ks = config.eval.ks
  selectable = {f'{m}@{k}' for m in ('p', 'r', 'psib') for k in ks} | {'map', 'auc'}
  description = (f'{train.num_images} train / {valid.num_images} valid / {test.num_images} test '
                 f'images, {train.num_labels} labels, {train.num_features} features; '
                 f'{train.skipped_empty} examples skipped for empty label sets')
  return Method(validate=validate, test=test_fn, select_metrics=frozenset(selectable),
                description=description, **fields)


def num_seen(ds: SparseDataset) -> int:
  return ds.num_labels if ds.num_seen_labels is None else ds.num_seen_labels



# ---------------------------------------------------------------- WSABIE

def step_config(config: ml_collections.ConfigDict, num_labels: int) -> step_lib.StepConfig:
  return step_lib.StepConfig(
      num_labels=num_labels, loss=config.loss.kind, num_draws=config.loss.num_draws,
      rank_weights=config.loss.rank_weights, rank_estimate=config.loss.rank_estimate,
      violators=config.loss.get('violators', 'first'),
      sampler=config.loss.get('sampler', 'uniform'), rank_scale=config.loss.get('rank_scale', 0.01),
      refresh_every_pairs=config.loss.get('refresh_every_pairs', 0),
      margin=config.loss.margin, score=config.model.score, optimizer=config.optim.kind,
      learning_rate=config.optim.learning_rate, max_norm=config.model.max_norm)


def wsabie_state(config, num_features: int, num_labels: int) -> step_lib.TrainState:
  return step_lib.init_state(jax.random.PRNGKey(config.seed), num_features,
                             step_config(config, num_labels), config.model.dim,
                             config.optim.adagrad_init)


def wsabie(config: ml_collections.ConfigDict, splits, mesh) -> Method:
  train = splits[0]
  cfg = step_config(config, train.num_labels)
  stream = pair_stream(train, config.train.batch_size, config.seed)
  if mesh.devices.size > 1 and cfg.loss != 'exact':
    train_step = parallel.make_parallel_train_step(cfg, mesh)
    place = lambda state: parallel.replicate(state, mesh)
    put = lambda batch: parallel.shard_batch(batch, mesh)
  else:
    train_step, place, put = step_lib.make_train_step(cfg), lambda s: s, jax.device_put
  probe = None
  if config.train.get('probe_pairs', 0):  # fixed training pairs, for paper 003 Fig. 1
    probe = pair_stream(train, config.train.probe_pairs, config.seed + 1).batch(0)

  def on_validation(state) -> dict:
    if probe is None:
      return {}
    return {f'uniform_{k}': v for k, v in evaluation.uniform_draws_needed(
        state.params, probe, config.loss.margin, config.model.score).items()}

  return ranking_method(
      config, splits, lambda state: wsabie_scorer(state, num_seen(train)), on_validation,
      lambda state, test, kw, workdir: {},
      init_state=lambda: wsabie_state(config, train.num_features, train.num_labels),
      place=place, stream=stream, train_step=train_step, put=put, vocabulary=vocabulary(train))


def wsabie_scorer(state, num_labels: int):
  V = state.params.V_dxD
  return (lambda i, v: evaluation.embed(V, i, v)), state.params.W_YxD[:num_labels]


def like_state(config: ml_collections.ConfigDict, vocab: dict):
  """A state shaped like a workdir's checkpoints (from its vocabulary.json), to restore into."""
  num_labels = len(vocab['label_names'])
  if method_name(config) == 'wsabie':
    return wsabie_state(config, vocab['num_features'], num_labels)
  from wsabie_jax import skipgram_run
  cfg = skipgram_run.skipgram_config(config, vocab['num_features'],
                                     vocab.get('num_seen_labels') or num_labels)
  return skipgram_run.skipgram_state(config, cfg,
                                     np.zeros((len(vocab['word_names']), cfg.widths[-1]), np.float32))


def scorer(config: ml_collections.ConfigDict, vocab: dict, state):
  """(embed_fn, labels_YxD) of a restored state: what evaluation and annotation read."""
  seen = vocab.get('num_seen_labels') or len(vocab['label_names'])
  if method_name(config) == 'wsabie':
    return wsabie_scorer(state, seen)
  from wsabie_jax import skipgram_run
  return skipgram_run.skipgram_scorer(
      skipgram_run.skipgram_config(config, vocab['num_features'], seen), state, seen)

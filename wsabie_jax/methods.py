"""What the training loop needs from each method, assembled from a config:
WSABIE (paper 000), the image–word skip-gram (paper 004) or objects and
parts (paper 002, `wsabie_jax/parts_run.py`).

`config.method` picks one ('wsabie' when absent). A Method is plain data —
functions and values — so the loop in train.py is the same for all.
"""
from __future__ import annotations

import json
import logging
import pathlib
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax import evaluation, oov, parallel, samplers, skipgram_step, step as step_lib
from wsabie_jax import word_vectors
from wsabie_jax.data import (SparseDataset, batching, dataset, load_splits, pair_stream, synthetic,
                             synthetic_spec)

METHODS = ('wsabie', 'skipgram', 'parts')
log = logging.getLogger('wsabie_jax')


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
    return skipgram(config, (train, valid, test), mesh)
  return wsabie(config, (train, valid, test), mesh)


def eval_kwargs(config, data) -> dict:
  return dict(score=config.model.score, ks=tuple(config.eval.ks), batch_size=config.eval.batch_size,
              chunk=config.eval.label_chunk, label_parents=data.label_parents, f1_k=config.eval.f1_k)


def vocabulary(ds) -> dict:
  return {'label_names': ds.label_names, 'num_features': ds.num_features,
          'label_parents': None if ds.label_parents is None else ds.label_parents.tolist(),
          'num_seen_labels': ds.num_seen_labels}


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
    seen = test if train.num_seen_labels is None else dataset.select_labels(
        test, np.arange(train.num_seen_labels))
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


# ---------------------------------------------------------------- skip-gram (paper 004)

def skipgram_config(config: ml_collections.ConfigDict, num_features: int,
                    num_tags: int) -> skipgram_step.SkipGramConfig:
  loss = config.loss
  return skipgram_step.SkipGramConfig(
      num_features=num_features, num_tags=num_tags, widths=tuple(config.model.widths),
      loss=loss.kind, sampled=loss.sampled, num_positives=loss.num_positives,
      num_negatives=loss.num_negatives, negatives=loss.negatives,
      negative_power=loss.negative_power, alpha=loss.alpha, beta=loss.beta, joint=loss.joint,
      tower_learning_rate=config.optim.tower_learning_rate, word_optimizer=config.optim.kind,
      word_learning_rate=config.optim.learning_rate)


def num_seen(ds: SparseDataset) -> int:
  return ds.num_labels if ds.num_seen_labels is None else ds.num_seen_labels


def initial_words(config: ml_collections.ConfigDict, train: SparseDataset) -> word_vectors.WordTable:
  """V∪ before training: the labels' pretrained vectors, then text-only words (§2.1, §3.1)."""
  words = config.words
  dim = config.model.widths[-1]
  if words.source == 'synthetic':
    if config.data.kind != 'synthetic':
      raise ValueError("config.words.source='synthetic' needs config.data.kind='synthetic'")
    spec = synthetic_spec(config.data)
    names, vectors = synthetic.pretrained_word_vectors(
        spec, synthetic.make_world(spec), dim, words.noise, words.scale, words.extra)
  elif words.source == 'file':
    names, vectors = word_vectors.read_text(words.path, set(train.label_names), words.extra)
  elif words.source == 'random':
    names, vectors = [], np.zeros((0, dim), np.float32)
  else:
    raise ValueError(f"config.words.source={words.source!r} is not 'synthetic', 'file' or 'random'")
  if vectors.shape[1] != dim:
    raise ValueError(f'{words.get("path") or words.source}: vectors have {vectors.shape[1]} '
                     f'dimensions, config.model.widths ends in {dim}')
  table = word_vectors.align(train.label_names, names, vectors, words.extra, seed=config.seed)
  if words.source == 'random':  # no text embedding: N(0, 1/D) rows
    table.vectors_VxD = np.random.default_rng(config.seed).normal(
        0, 1 / np.sqrt(dim), table.vectors_VxD.shape).astype(np.float32)
  return table


def skipgram_state(config, cfg: skipgram_step.SkipGramConfig, words_VxD):
  return skipgram_step.init_state(jax.random.PRNGKey(config.seed), cfg, words_VxD,
                                  config.optim.adagrad_init)


def skipgram(config: ml_collections.ConfigDict, splits, mesh) -> Method:
  train = splits[0]
  if not isinstance(train, SparseDataset):
    raise ValueError("method='skipgram' trains from in-memory data (data.kind != 'shards')")
  seen = num_seen(train)
  cfg = skipgram_config(config, train.num_features, seen)
  table = initial_words(config, train)
  cov = table.coverage(train.label_frequencies())
  log.info('word vectors (%s): %d of %d labels found (%.1f%% of tag occurrences), %d text-only '
           'words', config.words.source, cov['labels_covered'], cov['num_labels'],
           100 * cov['tag_coverage'], cov['extra_words'])
  stream = batching.ImageStream(train, batching.pad_images(train), config.train.batch_size,
                                config.seed)
  tag_cdf_Y = samplers.tag_cdf(train.label_frequencies()[:seen], cfg.negative_power)
  train_step = skipgram_step.make_train_step(cfg, tag_cdf_Y)
  place, put = lambda s: s, jax.device_put
  if mesh.devices.size > 1:  # the batch split over devices, the state replicated
    train_step = parallel.make_replicated_step(
        lambda state, batch: skipgram_step.train_step(cfg, tag_cdf_Y, state, batch), mesh)
    place = lambda state: parallel.replicate(state, mesh)
    put = lambda batch: parallel.shard_batch(batch, mesh)

  def scorer(state):
    return skipgram_scorer(cfg, state, seen)

  def finish(state, test: SparseDataset, ev: dict, workdir) -> dict:
    out, fitted_VxD = out_of_vocabulary(config, cfg, state, table, test, ev)
    if jax.process_index() == 0:
      save_words(workdir, table.names, fitted_VxD)
    return out

  return ranking_method(
      config, splits, scorer, lambda state: {}, finish,
      init_state=lambda: skipgram_state(config, cfg, table.vectors_VxD), place=place,
      stream=stream, train_step=train_step, put=put,
      vocabulary={**vocabulary(train), 'word_names': table.names})


def like_state(config: ml_collections.ConfigDict, vocab: dict):
  """A state shaped like a workdir's checkpoints (from its vocabulary.json), to restore into."""
  num_labels = len(vocab['label_names'])
  if method_name(config) == 'wsabie':
    return wsabie_state(config, vocab['num_features'], num_labels)
  cfg = skipgram_config(config, vocab['num_features'], vocab.get('num_seen_labels') or num_labels)
  return skipgram_state(config, cfg, np.zeros((len(vocab['word_names']), cfg.widths[-1]), np.float32))


def scorer(config: ml_collections.ConfigDict, vocab: dict, state):
  """(embed_fn, labels_YxD) of a restored state: what evaluation and annotation read."""
  seen = vocab.get('num_seen_labels') or len(vocab['label_names'])
  if method_name(config) == 'wsabie':
    return wsabie_scorer(state, seen)
  return skipgram_scorer(skipgram_config(config, vocab['num_features'], seen), state, seen)


def skipgram_scorer(cfg: skipgram_step.SkipGramConfig, state, num_labels: int):
  tower = state.tower
  embed = jax.jit(lambda i, v: skipgram_step.embed(cfg, tower, i, v))
  return embed, state.words_VxD[:num_labels]


def out_of_vocabulary(config, cfg, state, table: word_vectors.WordTable, test: SparseDataset,
                      ev: dict) -> tuple[dict, jax.Array]:
  """The OOV pass (eq. (4)) and, with held-out labels, zero-shot tagging on them:
  (metrics, the word table after the pass).

  Held-out labels are ranked among themselves (paper 004 Table 2's protocol),
  with their vectors as training left them and after the OOV pass.
  """
  out = {'tag_coverage': table.coverage(test.label_frequencies())['tag_coverage'],
         'extra_words': len(table.names) - table.num_labels}
  words = state.words_VxD
  initial = jnp.asarray(table.vectors_VxD)
  seen = cfg.num_tags
  if seen < words.shape[0] and config.oov.steps:
    out['oov_loss_before'] = float(oov.mean_loss(words, initial, seen))
    fitted = oov.fit_unseen(words, initial, jax.random.PRNGKey(config.seed), first_unseen=seen,
                            steps=config.oov.steps, rows_per_step=config.oov.rows_per_step,
                            cols_per_step=config.oov.cols_per_step,
                            learning_rate=config.oov.learning_rate)
    out['oov_loss_after'] = float(oov.mean_loss(fitted, initial, seen))
  else:
    fitted = words
  if seen < table.num_labels:
    unseen_test = dataset.select_labels(test, np.arange(seen, table.num_labels))
    padded = batching.pad_images(unseen_test)
    embed, _ = skipgram_scorer(cfg, state, seen)
    kw = dict(ev, label_parents=unseen_test.label_parents)
    for name, table_VxD in (('zeroshot', words), ('zeroshot_oov', fitted)):
      got = evaluation.evaluate_ranking(embed, table_VxD[seen:table.num_labels], padded, **kw)
      out.update({f'{name}_{k}': v for k, v in got.items()})
  return out, fitted


def save_words(workdir, names: list[str], words_VxD) -> None:
  """The word table after the OOV pass: every word, searchable (launch/annotate.py)."""
  workdir = pathlib.Path(workdir)
  np.save(workdir / 'words.npy', np.asarray(jax.device_get(words_VxD)))
  (workdir / 'words.json').write_text(json.dumps(names))

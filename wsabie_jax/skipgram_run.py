"""The image–word skip-gram method for the training loop (config.method='skipgram', paper 004).

Builds the word table V∪ = [V_I | V_D] from the configured text embedding
(synthetic, a word2vec / GloVe file, or random), the image stream, the
jitted step (data parallel when the mesh has several devices), and the test
extras: the out-of-vocabulary pass (eq. (4)) and zero-shot tagging on
held-out labels, with the fitted word table saved to the workdir.
"""
from __future__ import annotations

import json
import logging
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax import evaluation, oov, parallel, samplers, skipgram_step, word_vectors
from wsabie_jax.data import SparseDataset, batching, dataset, synthetic, synthetic_spec
from wsabie_jax.methods import Method, num_seen, ranking_method, vocabulary

log = logging.getLogger('wsabie_jax')


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


def method(config: ml_collections.ConfigDict, splits, mesh) -> Method:
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

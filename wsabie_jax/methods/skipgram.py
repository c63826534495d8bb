"""The image–word skip-gram method for the training loop (config.method='skipgram', paper 004).

Builds the word table V∪ = [V_I | V_D] from the configured text embedding
(synthetic, a word2vec / GloVe file, or random), the image stream, the
jitted step (data parallel when the mesh has several devices), and the test
extras: the out-of-vocabulary pass (eq. (4)) and zero-shot tagging on
held-out labels, with the fitted word table saved to the workdir.
"""
from __future__ import annotations

import functools
import json
import logging
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax.config import from_config, to_config
from wsabie_jax.training import settings as run_config
from wsabie_jax.core import evaluation, precision
from wsabie_jax.core import samplers
from wsabie_jax import data as data_lib
from wsabie_jax.data import SparseDataset, batching, dataset, synthetic, synthetic_spec
from wsabie_jax.methods import common
from wsabie_jax.skipgram import oov
from wsabie_jax.skipgram import step as skipgram_step
from wsabie_jax.skipgram import word_vectors
from wsabie_jax.training.method import Method

log = logging.getLogger('wsabie_jax')


def base_config(data: ml_collections.ConfigDict | None = None, **sections) -> ml_collections.ConfigDict:
  """Paper 004's defaults on the given data (the synthetic default when None):
  sections model, loss, optim (skipgram/settings.py), words, oov."""
  return run_config.assemble(
      'skipgram', skipgram_step.SkipGramConfig.defaults(),
      data,
      words=to_config(word_vectors.WordsConfig), oov=to_config(oov.OOVConfig),
      **{'train': run_config.train(select_metric='p@5'), **sections})


def skipgram_config(config: ml_collections.ConfigDict, num_features: int,
                    num_tags: int) -> skipgram_step.SkipGramConfig:
  return skipgram_step.SkipGramConfig.read(config, num_features=num_features, num_tags=num_tags)


def check_config(config: ml_collections.ConfigDict) -> dict:
  return {**skipgram_config(config, num_features=1, num_tags=1).by_section(),
          'words': from_config(word_vectors.WordsConfig, config.words, 'config.words'),
          'oov': from_config(oov.OOVConfig, config.oov, 'config.oov')}


def initial_words(config: ml_collections.ConfigDict, train: SparseDataset) -> word_vectors.WordTable:
  """V∪ before training: the labels' pretrained vectors, then text-only words (§2.1, §3.1)."""
  words = from_config(word_vectors.WordsConfig, config.words, 'config.words')
  dim = config.model.widths[-1]
  if words.source == 'synthetic':
    if config.data.kind != 'synthetic':
      raise ValueError("config.words.source='synthetic' needs config.data.kind='synthetic'")
    spec = synthetic_spec(config.data)
    vocab = data_lib.synthetic_vocabulary(spec)
    names, vectors = synthetic.pretrained_word_vectors(
        spec, synthetic.make_world(spec, vocab), dim, words.noise, words.scale, words.extra)
  elif words.source == 'file':
    names, vectors = word_vectors.read_text(words.path, set(train.label_names), words.extra)
  else:  # 'random'
    names, vectors = [], np.zeros((0, dim), np.float32)
  if vectors.shape[1] != dim:
    raise ValueError(f'{words.path or words.source}: vectors have {vectors.shape[1]} '
                     f'dimensions, config.model.widths ends in {dim}')
  table = word_vectors.align(train.label_names, names, vectors, words.extra, seed=config.seed)
  if words.source == 'random':  # no text embedding: N(0, 1/D) rows
    table.vectors_VxD = np.random.default_rng(config.seed).normal(
        0, 1 / np.sqrt(dim), table.vectors_VxD.shape).astype(np.float32)
  return table


def init_state(config, cfg: skipgram_step.SkipGramConfig, words_VxD):
  return skipgram_step.init_state(jax.random.PRNGKey(config.seed), cfg, words_VxD)


def build(config: ml_collections.ConfigDict, mesh) -> Method:
  splits = common.load_splits(config)
  train = splits[0]
  if not isinstance(train, SparseDataset):
    raise ValueError("method='skipgram' trains from in-memory data (data.kind != 'shards')")
  seen = common.num_seen(train)
  cfg = skipgram_config(config, train.num_features, seen)
  table = initial_words(config, train)
  cov = table.coverage(train.label_frequencies())
  log.info('word vectors (%s): %d of %d labels found (%.1f%% of tag occurrences), %d text-only '
           'words', config.words.source, cov['labels_covered'], cov['num_labels'],
           100 * cov['tag_coverage'], cov['extra_words'])
  stream = batching.ImageStream(train, batching.pad_images(train), config.train.batch_size,
                                config.seed)
  tags = samplers.tag_distribution(train.label_frequencies()[:seen], cfg.loss.negative_power)

  def scorer(state):
    return _scorer(cfg, state, seen)

  def finish(state, test: SparseDataset, ev: dict, workdir) -> dict:
    out, fitted_VxD = out_of_vocabulary(config, cfg, state, table, test, ev)
    if jax.process_index() == 0:
      save_words(workdir, table.names, fitted_VxD)
    return out

  return common.ranking_method(
      config, splits, scorer, lambda state: {}, finish,
      init_state=lambda: init_state(config, cfg, table.vectors_VxD), stream=stream, mesh=mesh,
      vocabulary={**common.vocabulary(train), 'word_names': table.names},
      pure_step=lambda state, batch: skipgram_step.train_step(cfg, tags, state, batch))


@functools.partial(jax.jit, static_argnums=0)
@precision.full_float32
def _embed(cfg: skipgram_step.SkipGramConfig, tower, feat_idx_BxF, feat_val_BxF) -> jax.Array:
  return skipgram_step.embed(cfg, tower, feat_idx_BxF, feat_val_BxF)


def _scorer(cfg: skipgram_step.SkipGramConfig, state, num_labels: int):
  # The tower an argument of one program: closed over by a function jitted
  # here, its weights would be constants of a new program each validation.
  return functools.partial(_embed, cfg, state.tower), state.words_VxD[:num_labels]


def _seen(vocab: dict) -> int:
  return vocab.get('num_seen_labels') or len(vocab['label_names'])


def fit(config: ml_collections.ConfigDict) -> tuple[ml_collections.ConfigDict, dict]:
  """Fits nothing to the data: (the config, {})."""
  return config, {}


def like_state(config: ml_collections.ConfigDict, vocab: dict):
  """A state shaped like a workdir's checkpoints (from its vocabulary.json), to restore into."""
  cfg = skipgram_config(config, vocab['num_features'], _seen(vocab))
  return init_state(config, cfg, np.zeros((len(vocab['word_names']), cfg.model.widths[-1]),
                                          np.float32))


def scorer(config: ml_collections.ConfigDict, vocab: dict, state, workdir=None):
  """(embed_fn, labels_YxD) of a restored state: the tower and the seen tags' vectors."""
  return _scorer(skipgram_config(config, vocab['num_features'], _seen(vocab)), state, _seen(vocab))


def evaluate(config: ml_collections.ConfigDict, vocab: dict, state, split: str,
             baseline: bool, workdir=None) -> dict:
  """Ranking metrics of a restored state on a split of its data (launch/evaluate.py)."""
  train, valid, test = common.load_splits(config)
  return common.evaluate_split(config, train, test if split == 'test' else valid,
                               scorer(config, vocab, state), baseline)


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
  pass_cfg = from_config(oov.OOVConfig, config.oov, 'config.oov')
  if seen < words.shape[0] and pass_cfg.steps:
    out['oov_loss_before'] = float(oov.mean_loss(words, initial, seen))
    fitted = oov.fit_unseen(words, initial, jax.random.PRNGKey(config.seed), first_unseen=seen,
                            steps=pass_cfg.steps, rows_per_step=pass_cfg.rows_per_step,
                            cols_per_step=pass_cfg.cols_per_step,
                            learning_rate=pass_cfg.learning_rate)
    out['oov_loss_after'] = float(oov.mean_loss(fitted, initial, seen))
  else:
    fitted = words
  if seen < table.num_labels:
    unseen_test = dataset.select_labels(test, np.arange(seen, table.num_labels))
    padded = batching.pad_images(unseen_test)
    embed, _ = _scorer(cfg, state, seen)
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


# Paper 004 Table 3's rows: the objective, sampled or full, joint or fixed word vectors.
ROWS = ('proposed', 'full', 's_fixed', 'fixed', 's_fast0tag', 'fast0tag')


def apply_row(c: ml_collections.ConfigDict, row: str) -> ml_collections.ConfigDict:
  """proposed: S+Opt+X-Ent; full: Opt+X-Ent; s_fixed / fixed: sampled / full
  eq. (1) on fixed vectors; s_fast0tag / fast0tag: eq. (5) sampled / full."""
  if row not in ROWS:
    raise ValueError(f'unknown row {row!r} (expected one of {ROWS})')
  c.loss.kind = 'fast0tag' if row.endswith('fast0tag') else 'xent'
  c.loss.sampled = row in ('proposed', 's_fixed', 's_fast0tag')
  c.loss.joint = row in ('proposed', 'full')
  return c

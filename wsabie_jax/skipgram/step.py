"""State and jitted step for the image–word objectives of paper 004.

The image tower is a dense flax network trained with optax (Adam). The word
table V∪ = [V_I | V_D] (paper 004 §2.1) has one row per training tag
(rows 0..num_tags−1) and then the words only the text embedding has; when
`joint`, the rows a step drew are updated row-sparsely (row-wise Adagrad, the
cost rule of docs/DESIGN.md §1), as the paper keeps and updates the word layer apart
from the network (§3.2). The full objectives score every training tag, so
they update all V_I rows each step: that O(Y·D) cost is what Table 1 times.

A batch holds B images with static shapes:
  feat_idx_BxF, feat_val_BxF  the image's non-zeros, padded with value 0;
  pos_BxT, num_pos_B          its tags, sorted, padded with an id ≥ num_tags;
  weight_B                    1 for real images, 0 for padding.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from wsabie_jax.core import precision
from wsabie_jax.core import row_optim
from wsabie_jax.core import samplers
from wsabie_jax.skipgram import objectives
from wsabie_jax.skipgram.settings import (NEGATIVES, SkipGramConfig,  # noqa: F401 (the
                                          SkipGramLoss, SkipGramOptim, TowerConfig)  # method's names)

class SkipGramState(NamedTuple):
  step: jax.Array
  tower: Any              # flax params of the image tower
  tower_opt: Any          # its optax state
  words_VxD: jax.Array    # V∪ = [V_I | V_D]
  acc_words_V: jax.Array  # row-wise Adagrad accumulators of the word rows
  key: jax.Array
  rate_scale: jax.Array   # f32[]: both learning rates' multiplier (wsabie/step.py TrainState)


def init_state(key: jax.Array, cfg: SkipGramConfig, words_VxD, max_features: int = 1) -> SkipGramState:
  """Tower initialised at random; words from the (pretrained) table V∪."""
  words_VxD = jnp.asarray(words_VxD, jnp.float32)
  if words_VxD.shape[1] != cfg.model.widths[-1]:
    raise ValueError(f'the word vectors have {words_VxD.shape[1]} dimensions but the tower '
                     f'ends in {cfg.model.widths[-1]} (config.model.widths)')
  return _init_rest(key, cfg, max_features, words_VxD.shape[0])._replace(words_VxD=words_VxD)


# The state but the word table as one program (wsabie/step.py init_state);
# the table stays out of it (a text embedding's would be copied into the
# program's output), None in what it returns.
@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _init_rest(key: jax.Array, cfg: SkipGramConfig, max_features: int,
               num_words: int) -> SkipGramState:
  key_init, key_steps = jax.random.split(key)
  dummy = jnp.zeros((1, max_features), jnp.int32)
  params = cfg.tower.init(key_init, dummy, dummy.astype(jnp.float32))['params']
  return SkipGramState(jnp.zeros((), jnp.int32), params, cfg.tower_optimizer.init(params), None,
                       row_optim.init_accumulator(num_words, cfg.optim.kind,
                                                  cfg.optim.adagrad_init),
                       key_steps, jnp.ones((), jnp.float32))


def embed(cfg: SkipGramConfig, tower_params, feat_idx_BxF, feat_val_BxF) -> jax.Array:
  return cfg.tower.apply({'params': tower_params}, feat_idx_BxF, feat_val_BxF)


def draw_tags(cfg: SkipGramConfig, key: jax.Array, batch: dict, tags: samplers.AliasTable):
  """P positives (with replacement) and N negatives per image, and which negatives count."""
  key_pos, key_neg = jax.random.split(key)
  pos_BxT, num_pos_B = batch['pos_BxT'], batch['num_pos_B']
  pos_BxP = samplers.sample_tags(key_pos, pos_BxT, num_pos_B, cfg.loss.num_positives)
  if cfg.loss.negatives == 'adjacent':
    neg_BxN = samplers.adjacent_draws(key_neg, pos_BxT, num_pos_B, cfg.loss.num_negatives)
  else:
    neg_BxN = samplers.frequency_draws(key_neg, tags,
                                       (pos_BxT.shape[0], cfg.loss.num_negatives))
  return pos_BxP, neg_BxN, ~samplers.is_positive(neg_BxN, pos_BxT)


def train_step(cfg: SkipGramConfig, tags: samplers.AliasTable, state: SkipGramState, batch: dict):
  """The step traced under the configured matmul precision (core/precision.py)."""
  with precision.scope(cfg.model.matmul_precision):
    return _train_step(cfg, tags, state, batch)


def _train_step(cfg: SkipGramConfig, tags: samplers.AliasTable, state: SkipGramState, batch: dict):
  """One step of eq. (1) or (5); the sampled forms touch only the drawn word rows."""
  weight_B = batch['weight_B']
  words = state.words_VxD
  D = words.shape[1]
  if cfg.loss.sampled:
    pos_BxP, neg_BxN, neg_ok_BxN = draw_tags(cfg, jax.random.fold_in(state.key, state.step),
                                             batch, tags)
    rows_R = jnp.concatenate([pos_BxP, neg_BxN], axis=1).reshape(-1)
    P = cfg.loss.num_positives

    def loss_fn(tower_params, rows_RxD):
      image_BxD = embed(cfg, tower_params, batch['feat_idx_BxF'], batch['feat_val_BxF'])
      rows_BxKxD = rows_RxD.reshape(weight_B.shape[0], -1, D)
      v_pos, v_neg = rows_BxKxD[:, :P], rows_BxKxD[:, P:]
      if cfg.loss.kind == 'xent':
        loss_B = objectives.sampled_xent(image_BxD, v_pos, v_neg, pos_BxP, neg_ok_BxN,
                                         cfg.loss.alpha)
      else:
        loss_B = objectives.sampled_fast0tag(image_BxD, v_pos, v_neg, neg_ok_BxN, cfg.loss.beta)
      return jnp.sum(weight_B * loss_B)
  else:
    rows_R = jnp.arange(cfg.num_tags)

    def loss_fn(tower_params, rows_RxD):
      image_BxD = embed(cfg, tower_params, batch['feat_idx_BxF'], batch['feat_val_BxF'])
      full = objectives.full_xent if cfg.loss.kind == 'xent' else objectives.full_fast0tag
      weight = cfg.loss.alpha if cfg.loss.kind == 'xent' else cfg.loss.beta
      return jnp.sum(weight_B * full(image_BxD, rows_RxD, batch['pos_BxT'], weight))

  # The loss is summed over images: each word row gets its per-image gradients
  # (as WSABIE's rows do); Adam's steps do not depend on the gradient's scale.
  if cfg.loss.joint:
    loss, (g_tower, g_rows_RxD) = jax.value_and_grad(loss_fn, (0, 1))(state.tower, words[rows_R])
    words, acc = row_optim.update_rows(
        words, state.acc_words_V, rows_R, g_rows_RxD, learning_rate=cfg.optim.learning_rate * state.rate_scale,
        optimizer=cfg.optim.kind, max_norm=jnp.inf)
  else:  # fixed word vectors: only the tower learns
    loss, g_tower = jax.value_and_grad(loss_fn)(state.tower, words[rows_R])
    acc = state.acc_words_V
  updates, tower_opt = cfg.tower_optimizer.update(g_tower, state.tower_opt, state.tower)
  # Adam's update is its rate times a direction: scaling it scales the rate.
  updates = jax.tree.map(lambda u: u * state.rate_scale, updates)
  tower_params = optax.apply_updates(state.tower, updates)
  stats = {'loss': loss, 'pairs': jnp.sum(weight_B > 0)}
  return state._replace(step=state.step + 1, tower=tower_params, tower_opt=tower_opt,
                        words_VxD=words, acc_words_V=acc), stats


def make_train_step(cfg: SkipGramConfig, tags: samplers.AliasTable):
  """The jitted step with the state donated."""
  return jax.jit(lambda state, batch: train_step(cfg, tags, state, batch), donate_argnums=0)

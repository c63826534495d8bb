"""TrainState and the jitted, donated WSABIE training step.

A batch holds B positive pairs (x, y) with static shapes:
  feat_idx_SxN, feat_val_SxN, the images' non-zeros packed in S packs of N
  feat_row_SxN                slots (data/packing.py; padded images,
                              feat_idx_BxF and feat_val_BxF, are taken too);
  label_B                     the positive y of this pair;
  pos_BxP, num_pos_B          all of the image's positives, sorted, padded with Y
                              (negatives must avoid every one of them);
  weight_B                    1 for real pairs, 0 for padding.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax.wsabie import adaptive_sampler
from wsabie_jax.core import model
from wsabie_jax.core import precision
from wsabie_jax.core import row_optim
from wsabie_jax.core import samplers
from wsabie_jax.data import packing
from wsabie_jax.training import parallel
from wsabie_jax.wsabie import exact_rank
from wsabie_jax.wsabie.objective import choose_objective, pair_loss
# The settings, importable from here too (step.StepConfig, step.LossConfig, …).
from wsabie_jax.wsabie.settings import (LOSSES, SAMPLERS, LossConfig, ModelConfig,  # noqa: F401
                                        OptimConfig, StepConfig)

class TrainState(NamedTuple):
  step: jax.Array
  params: model.Params
  acc_V_d: jax.Array  # row-wise Adagrad accumulators (empty for SGD)
  acc_W_Y: jax.Array
  key: jax.Array      # raw uint32[2]; the step's key is fold_in(key, step)
  sampler: adaptive_sampler.SamplerState | None = None  # VSE-ens lists (sampler='adaptive')


def init_state(key: jax.Array, num_features: int, cfg: StepConfig) -> TrainState:
  key_init, key_steps = jax.random.split(key)
  params = model.init_params(key_init, num_features, cfg.num_labels, cfg.model.dim,
                             cfg.model.max_norm, cfg.model.init_std)
  acc = lambda n: row_optim.init_accumulator(n, cfg.optim.kind, cfg.optim.adagrad_init)
  return TrainState(
      step=jnp.zeros((), jnp.int32), params=params, acc_V_d=acc(num_features),
      acc_W_Y=acc(cfg.num_labels), key=key_steps,
      sampler=(adaptive_sampler.refresh(params.W_YxD, 0) if cfg.loss.sampler == 'adaptive'
               else None))


class RowGrads(NamedTuple):
  """Gradients with respect to the rows a batch touched (docs/DESIGN.md §1)."""
  V_rows_R: jax.Array
  V_grads_RxD: jax.Array
  W_rows_S: jax.Array
  W_grads_SxD: jax.Array


def draw_uniforms(cfg: StepConfig, key: jax.Array, num_pos_B: jax.Array) -> jax.Array:
  """The randomness of the step's draws, B-leading (a data-parallel step slices it)."""
  if cfg.loss.sampler == 'adaptive':
    return adaptive_sampler.draw_uniforms(key, num_pos_B.shape[0], cfg.draws_per_pair)
  return samplers.uniform_draws(key, num_pos_B, cfg.num_labels, cfg.draws_per_pair)


def sampled_row_grads(cfg: StepConfig, params: model.Params, batch: dict, u_BxK: jax.Array,
                      sampler: adaptive_sampler.SamplerState | None = None):
  """WARP (Alg. 1 with K parallel draws) or AUC on gathered rows: (RowGrads, stats).

  The rows a batch touches are gathered here; the per-pair objective — which
  draws count and with what weight, then the weighted hinge — is written for
  one pair and vmapped; the gradients come back for the gathered rows only.
  `u_BxK` are the draws' uniforms (`draw_uniforms`).
  """
  V, W = params
  draw_negatives, weigh = choose_objective(cfg)
  W_pos_BxD = W[batch['label_B']]
  image_BxD, row_N = model.embed_packed(V, batch, batch['label_B'].shape[0])
  neg_BxK, valid_BxK = draw_negatives(cfg, sampler, image_BxD, batch, u_BxK)
  W_neg_BxKxD = W[neg_BxK]
  pos_score_B = model.score(image_BxD, W_pos_BxD[:, None], cfg.model.score)[:, 0]
  neg_scores_BxK = model.score(image_BxD, W_neg_BxKxD, cfg.model.score)
  if cfg.loss.sampler == 'adaptive' and cfg.loss.kind == 'warp':
    proposal_BxK = adaptive_sampler.proposal_prob(sampler, image_BxD, neg_BxK, cfg.loss.rank_scale)
  else:
    proposal_BxK = jnp.zeros(neg_BxK.shape)  # unused: uniform draws need no importance weights
  num_negatives_B = cfg.num_labels - batch['num_pos_B']
  pick_BxJ, weight_BxJ, (found_B, trials_B) = jax.vmap(functools.partial(weigh, cfg))(
      pos_score_B, neg_scores_BxK, num_negatives_B, valid_BxK, proposal_BxK)
  weight_BxJ = weight_BxJ * batch['weight_B'][:, None]
  if pick_BxJ.shape[1] == neg_BxK.shape[1]:  # every draw weighed: the rows are gathered already
    neg_ids_BxJ, W_neg_BxJxD = neg_BxK, W_neg_BxKxD
  else:
    neg_ids_BxJ = jnp.take_along_axis(neg_BxK, pick_BxJ, 1)
    W_neg_BxJxD = W[neg_ids_BxJ]

  def loss_fn(image_BxD, W_pos_BxD, W_neg_BxJxD):  # eq. (9), summed over pairs
    return jnp.sum(jax.vmap(functools.partial(pair_loss, cfg))(
        image_BxD, W_pos_BxD, W_neg_BxJxD, weight_BxJ))

  loss, (g_image_BxD, gW_pos, gW_neg) = jax.value_and_grad(loss_fn, (0, 1, 2))(
      image_BxD, W_pos_BxD, W_neg_BxJxD)
  gV_NxD = feature_row_grads(batch, row_N, g_image_BxD)
  real_B = batch['weight_B'] > 0
  stats = {'loss': loss, 'pairs': jnp.sum(real_B),
           # the rows read were finite (a NaN or inf row makes the scores reading it so)
           'nonfinite': jnp.sum(~jnp.isfinite(pos_score_B)) + jnp.sum(~jnp.isfinite(neg_scores_BxK)),
           'violator_found': jnp.sum(found_B & real_B),
           'draws_to_violator': jnp.sum(jnp.where(found_B & real_B, trials_B, 0))}
  grads = RowGrads(batch['feat_idx_SxN'].reshape(-1), gV_NxD,
                   jnp.concatenate([batch['label_B'], neg_ids_BxJ.reshape(-1)]),
                   jnp.concatenate([gW_pos, gW_neg.reshape(-1, W.shape[1])]))
  return grads, stats


def feature_row_grads(batch: dict, row_N: jax.Array, g_image_BxD: jax.Array) -> jax.Array:
  """image = Σ_f x_f V_f, so a feature row's gradient is its value times its
  image's: formed here, it fuses into the optimiser's reads (no N×D buffer)."""
  return batch['feat_val_SxN'].reshape(-1, 1) * g_image_BxD[row_N]


def exact_row_grads(cfg: StepConfig, params: model.Params, batch: dict):
  """OWPC-SGD: every label scored, all violators updated (eq. (6)); O(B·Y·D)
  time, O(B·C) memory in chunks of C = loss.label_chunk labels (exact_rank.py)."""
  V, W = params
  image_BxD, row_N = model.embed_packed(V, batch, batch['label_B'].shape[0])
  loss, g_image_BxD, gW = exact_rank.row_grads(
      image_BxD, W, batch['label_B'], batch['pos_BxP'], batch['weight_B'],
      score=cfg.model.score, rank_weights=cfg.loss.rank_weights, margin=cfg.loss.margin,
      chunk=min(cfg.loss.label_chunk, cfg.num_labels))
  grads = RowGrads(batch['feat_idx_SxN'].reshape(-1), feature_row_grads(batch, row_N, g_image_BxD),
                   jnp.arange(cfg.num_labels), gW)
  return grads, {'loss': loss, 'pairs': jnp.sum(batch['weight_B'] > 0),
                 'nonfinite': jnp.sum(~jnp.isfinite(image_BxD))}


def apply_row_grads(cfg: StepConfig, state: TrainState, grads: RowGrads,
                    sampler: adaptive_sampler.SamplerState | None = None) -> TrainState:
  """The optimiser step on the touched rows only, then their projection."""
  opt = dict(learning_rate=cfg.optim.learning_rate, optimizer=cfg.optim.kind,
             max_norm=cfg.model.max_norm, l2=cfg.optim.l2)
  V, acc_V = row_optim.update_rows(state.params.V_dxD, state.acc_V_d, grads.V_rows_R,
                                   grads.V_grads_RxD, **opt)
  W, acc_W = row_optim.update_rows(state.params.W_YxD, state.acc_W_Y, grads.W_rows_S,
                                   grads.W_grads_SxD, **opt)
  return TrainState(state.step + 1, model.Params(V, W), acc_V, acc_W, state.key, sampler)


def current_sampler(cfg: StepConfig, state: TrainState, global_batch_size: int):
  """The VSE-ens lists for this step, refreshed every |Y|·log|Y| pairs (Alg. 1 l. 4)."""
  if cfg.loss.sampler != 'adaptive':
    return None
  interval = adaptive_sampler.refresh_interval_steps(
      cfg.num_labels, global_batch_size, cfg.loss.refresh_every_pairs)
  return adaptive_sampler.maybe_refresh(state.sampler, state.params.W_YxD, state.step, interval)


def train_step(cfg: StepConfig, state: TrainState, batch: dict):
  """The step traced under the configured matmul precision (core/precision.py)."""
  with precision.scope(cfg.model.matmul_precision):
    return _train_step(cfg, state, batch)


def _train_step(cfg: StepConfig, state: TrainState, batch: dict):
  """One SGD step; touches only the batch's feature rows and label rows."""
  batch = packing.from_padded(batch)
  if cfg.loss.kind == 'exact':
    grads, stats = exact_row_grads(cfg, state.params, batch)
    return apply_row_grads(cfg, state, grads), stats
  sampler = current_sampler(cfg, state, batch['label_B'].shape[0])
  u_BxK = draw_uniforms(cfg, jax.random.fold_in(state.key, state.step), batch['num_pos_B'])
  grads, stats = sampled_row_grads(cfg, state.params, batch, u_BxK, sampler)
  return apply_row_grads(cfg, state, grads, sampler), stats


def make_train_step(cfg: StepConfig):
  """The jitted step with the state donated (its tables are updated in place)."""
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)


def local_train_step(cfg: StepConfig):
  """The per-device step of data parallelism (under shard_map, axis parallel.AXIS).

  Each device scores its slice of the batch and differentiates with respect
  to the rows it gathered; the touched rows and their gradients are
  all-gathered and every replica applies the same update. The draws are the
  single-device step's, sliced, so N devices give the parameters one gives.
  """
  if cfg.loss.kind == 'exact':
    raise ValueError("the exact-rank reference (loss kind='exact') has no per-device step")
  axis = parallel.AXIS

  @precision.with_precision(cfg.model.matmul_precision)
  def local_step(state: TrainState, batch: dict):
    batch = packing.from_padded(batch)
    rows = batch['label_B'].shape[0]
    # The global batch's draws (their uniforms), then this device's rows of them.
    num_pos_B = jax.lax.all_gather(batch['num_pos_B'], axis, tiled=True)
    u_BxK = draw_uniforms(cfg, jax.random.fold_in(state.key, state.step), num_pos_B)
    u_bxK = jax.lax.dynamic_slice_in_dim(u_BxK, jax.lax.axis_index(axis) * rows, rows)
    sampler = current_sampler(cfg, state, num_pos_B.shape[0])
    grads, stats = sampled_row_grads(cfg, state.params, batch, u_bxK, sampler)
    grads = jax.tree.map(lambda g: jax.lax.all_gather(g, axis, tiled=True), grads)
    stats = jax.tree.map(lambda s: jax.lax.psum(s, axis), stats)
    return apply_row_grads(cfg, state, grads, sampler), stats

  return local_step


def make_parallel_train_step(cfg: StepConfig, mesh):
  """The jitted, donated data-parallel step: (state, sharded batch) -> (state, stats)."""
  return parallel.make_sharded_step(local_train_step(cfg), mesh)

"""TrainState and the jitted, donated WSABIE training step.

A batch is a data/batching.PairBatch: B rows, each an image and Q of its
positive pairs (x, y), with static shapes (the images' non-zeros packed, or
padded and packed in the step; the rows' positives; all of each image's
positives, which the negatives must avoid).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.wsabie import adaptive_sampler
from wsabie_jax.core import model
from wsabie_jax.core import precision
from wsabie_jax.core import row_optim
from wsabie_jax.data import packing
from wsabie_jax.data.batching import PairBatch
from wsabie_jax.training import parallel
from wsabie_jax.wsabie import batch_draws, exact_rank, table_reads
from wsabie_jax.wsabie import objective
# (the draws' randomness, importable from here too: step.draw_uniforms)
from wsabie_jax.wsabie.objective import choose_objective, draw_uniforms, pairwise_loss  # noqa: F401
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
  # f32[]: every learning rate's multiplier (÷ train.plateau_factor a drop): a
  # value the step reads, so the loop changes it without recompiling the step.
  # (Last, with a default only because a NamedTuple's fields after one need one.)
  rate_scale: jax.Array | None = None


def init_state(key: jax.Array, num_features: int, cfg: StepConfig) -> TrainState:
  state = _init_tables(key, num_features, cfg.num_labels, cfg.model.dim, cfg.model.init_std,
                       cfg.optim.kind, np.float32(cfg.model.max_norm),
                       np.float32(cfg.optim.adagrad_init))
  return state._replace(sampler=objective.initial_sampler(cfg, state.params.W_YxD))


# The tables' init as one program, keyed by the shapes and kinds it reads
# (the bound and Adagrad's start are values), not the ~20 ops of the init
# run one by one, each a program of its own (docs/DESIGN.md §1).
@functools.partial(jax.jit, static_argnums=tuple(range(1, 6)))
def _init_tables(key, num_features: int, num_labels: int, dim: int, init_std: float,
                 optimizer: str, max_norm, adagrad_init) -> TrainState:
  key_init, key_steps = jax.random.split(key)
  params = model.init_params(key_init, num_features, num_labels, dim, max_norm, init_std)
  acc = lambda n: row_optim.init_accumulator(n, optimizer, adagrad_init)
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, acc_V_d=acc(num_features),
                    acc_W_Y=acc(num_labels), key=key_steps, rate_scale=jnp.ones((), jnp.float32))


class RowGrads(NamedTuple):
  """The step's gradient for each table: the touched rows' pieces (the cost
  model, docs/DESIGN.md §1) or, for a table read whole, its per-row sums
  (wsabie/table_reads.py)."""
  V: row_optim.RowPieces | row_optim.DenseGrad
  W: row_optim.RowPieces | row_optim.DenseGrad


def draws_loss(cfg: StepConfig, weight_BxQxJ: jax.Array, every_draw: bool):
  """Eq. (9) summed over the batch's pairs, as a function of the positives'
  scores (B×Q) and the negatives' (B×M): M = K draws shared by a row's Q
  pairs, each weighed by every pair (`every_draw`), or the Q·J picked ones."""
  B, Q, J = weight_BxQxJ.shape
  per_pair = jax.vmap(jax.vmap(functools.partial(pairwise_loss, cfg)))

  def loss(pos_BxQ, neg_BxM):
    neg_BxQxJ = (jnp.broadcast_to(neg_BxM[:, None], (B, Q, J)) if every_draw
                 else neg_BxM.reshape(B, Q, J))
    return jnp.sum(per_pair(pos_BxQ, neg_BxQxJ, weight_BxQxJ))

  return loss


def sampled_row_grads(cfg: StepConfig, params: model.Params, batch: PairBatch, u_BxK: jax.Array,
                      sampler: adaptive_sampler.SamplerState | None = None):
  """WARP (Alg. 1 with K parallel draws) or AUC: (RowGrads, stats).

  Row b holds an image and Q of its positive pairs (batching.PairBatch); the image is
  embedded once and its K draws are shared by its Q pairs: each pair's draws
  are still i.i.d. uniform over the image's negatives, as Alg. 1's are.
  The rows a batch touches are gathered here (or a small table read whole:
  table_reads.choose); which draws count for a pair and with what weight is
  written for one pair and vmapped. `u_BxK` are the draws' uniforms
  (`draw_uniforms`): with draws shared by the batch (loss.draws='per_batch')
  their K ids, scored by matmul unless the labels are read whole.
  """
  V, W = params
  label_BxQ, weight_BxQ = batch.label_BxQ, batch.weight_BxQ
  B, Q = label_BxQ.shape
  whole = table_reads.choose(cfg, B, Q, batch.feat_idx_SxN.size, V.shape[0])
  draw_negatives, weigh = choose_objective(cfg)
  image_BxD, V_grads_of = table_reads.embed(V, batch, B, whole.features)
  shared = cfg.draws_shared
  neg_BxK, valid_BxK = draw_negatives(cfg, sampler, image_BxD, batch, u_BxK)
  K = neg_BxK.shape[1]
  if whole.labels:
    pos_BxQ, neg_scores_BxK = table_reads.scores(W, image_BxD, label_BxQ, neg_BxK)
  elif shared:
    pos_BxQ, neg_scores_BxK, W_pos_BxQxD, W_drawn_KxD = batch_draws.scores(
        W, image_BxD, label_BxQ, u_BxK)
  else:
    W_pos_BxQxD, W_neg_BxKxD = W[label_BxQ], W[neg_BxK]
    pos_BxQ = model.score(image_BxD, W_pos_BxQxD, cfg.model.score)
    neg_scores_BxK = model.score(image_BxD, W_neg_BxKxD, cfg.model.score)
  proposal_BxK = objective.proposal(cfg, sampler, image_BxD, neg_BxK)
  num_negatives_B = cfg.num_labels - batch.num_pos_B
  min_negatives = cfg.num_labels - batch.pos_BxP.shape[1]  # (static: P is the widest row's)
  weigh_row = jax.vmap(functools.partial(weigh, cfg, min_negatives=min_negatives),
                       in_axes=(0, None, None, None, None))
  pick_BxQxJ, weight_BxQxJ, (found_BxQ, trials_BxQ) = jax.vmap(weigh_row)(
      pos_BxQ, neg_scores_BxK, num_negatives_B, valid_BxK, proposal_BxK)
  weight_BxQxJ = weight_BxQxJ * weight_BxQ[..., None]
  every_draw = pick_BxQxJ.shape[2] == K  # every draw weighed, in draw order
  pick_BxM = pick_BxQxJ.reshape(B, -1)
  neg_ids_BxM = neg_BxK if every_draw else jnp.take_along_axis(neg_BxK, pick_BxM, 1)
  loss_of = draws_loss(cfg, weight_BxQxJ, every_draw)
  neg_scores_BxM = (neg_scores_BxK if every_draw
                    else jnp.take_along_axis(neg_scores_BxK, pick_BxM, 1))
  if whole.labels:
    loss, g_image_BxD, W_grads = table_reads.label_grads(
        W, image_BxD, label_BxQ, neg_ids_BxM, loss_of, pos_BxQ, neg_scores_BxM)
  elif shared:
    loss, g_image_BxD, W_grads = batch_draws.label_grads(
        W_pos_BxQxD, W_drawn_KxD, u_BxK, image_BxD, label_BxQ, None if every_draw else pick_BxM,
        loss_of, pos_BxQ, neg_scores_BxM)
  else:
    W_neg_BxMxD = W_neg_BxKxD if every_draw else W[neg_ids_BxM]  # gathered already, or the picks

    def loss_fn(image_BxD, W_pos_BxQxD, W_neg_BxMxD):
      return loss_of(model.score(image_BxD, W_pos_BxQxD, cfg.model.score),
                     model.score(image_BxD, W_neg_BxMxD, cfg.model.score))

    loss, (g_image_BxD, gW_pos, gW_neg) = jax.value_and_grad(loss_fn, (0, 1, 2))(
        image_BxD, W_pos_BxQxD, W_neg_BxMxD)
    D = W.shape[1]
    W_grads = row_optim.RowPieces(jnp.concatenate([label_BxQ.reshape(-1), neg_ids_BxM.reshape(-1)]),
                                  jnp.concatenate([gW_pos.reshape(-1, D), gW_neg.reshape(-1, D)]))
  real_BxQ = weight_BxQ > 0
  stats = {'loss': loss, 'pairs': jnp.sum(real_BxQ),
           # the rows read were finite (a NaN or inf row makes the scores reading it so)
           'nonfinite': jnp.sum(~jnp.isfinite(pos_BxQ)) + jnp.sum(~jnp.isfinite(neg_scores_BxK)),
           'violator_found': jnp.sum(found_BxQ & real_BxQ),
           'draws_to_violator': jnp.sum(jnp.where(found_BxQ & real_BxQ, trials_BxQ, 0))}
  return RowGrads(V_grads_of(g_image_BxD), W_grads), stats


def exact_row_grads(cfg: StepConfig, params: model.Params, batch: PairBatch):
  """OWPC-SGD: every label scored, all violators updated (eq. (6)); O(B·Y·D)
  time. Labels read whole (table_reads.choose: Y ≤ loss.label_chunk, dot scores)
  by one B×Y matmul (table_reads.exact_label_grads); otherwise O(B·C) memory in
  chunks of C = loss.label_chunk labels (exact_rank.py), a row's Q pairs
  scored as Q rows of one pair."""
  V, W = params
  B, Q = batch.label_BxQ.shape
  whole = table_reads.choose(cfg, B, Q, batch.feat_idx_SxN.size, V.shape[0])
  image_BxD, V_grads_of = table_reads.embed(V, batch, B, whole.features)
  if whole.labels:
    loss, g_image_BxD, gW, rank_BxQ = table_reads.exact_label_grads(
        W, image_BxD, batch.label_BxQ, batch.weight_BxQ, batch.pos_BxP,
        rank_weights=cfg.loss.rank_weights, margin=cfg.loss.margin)
  else:
    per_pair = lambda x: jnp.repeat(x, Q, axis=0)
    loss, g_image_PxD, gW_YxD, rank_P = exact_rank.row_grads(
        per_pair(image_BxD), W, batch.label_BxQ.reshape(-1), per_pair(batch.pos_BxP),
        batch.weight_BxQ.reshape(-1), score=cfg.model.score,
        rank_weights=cfg.loss.rank_weights, margin=cfg.loss.margin,
        chunk=min(cfg.loss.label_chunk, cfg.num_labels))
    g_image_BxD = g_image_PxD.reshape(B, Q, -1).sum(1)
    gW = row_optim.RowPieces(jnp.arange(cfg.num_labels), gW_YxD)
    rank_BxQ = rank_P.reshape(B, Q)
  real_BxQ = batch.weight_BxQ > 0
  return RowGrads(V_grads_of(g_image_BxD), gW), {
      'loss': loss, 'pairs': jnp.sum(real_BxQ),
      'nonfinite': jnp.sum(~jnp.isfinite(image_BxD)),
      # pairs with a violator: the only ones that move (no draws to count)
      'violator_found': jnp.sum((rank_BxQ > 0) & real_BxQ)}


def apply_row_grads(cfg: StepConfig, state: TrainState, grads: RowGrads,
                    sampler: adaptive_sampler.SamplerState | None = None) -> TrainState:
  """The optimiser step on the touched rows only, then their projection."""
  opt = dict(learning_rate=cfg.optim.learning_rate * state.rate_scale, optimizer=cfg.optim.kind,
             max_norm=cfg.model.max_norm, l2=cfg.optim.l2)
  V, acc_V = row_optim.apply(state.params.V_dxD, state.acc_V_d, grads.V, **opt)
  W, acc_W = row_optim.apply(state.params.W_YxD, state.acc_W_Y, grads.W, **opt)
  return state._replace(step=state.step + 1, params=model.Params(V, W), acc_V_d=acc_V,
                        acc_W_Y=acc_W, sampler=sampler)


def train_step(cfg: StepConfig, state: TrainState, batch: PairBatch):
  """The step traced under the configured matmul precision (core/precision.py)."""
  with precision.scope(cfg.model.matmul_precision):
    return step_body(cfg, state, batch)


def step_body(cfg: StepConfig, state: TrainState, batch: PairBatch, axis: str | None = None):
  """One SGD step; touches only the batch's feature rows and label rows.

  The same body for one device and for many: with `axis` (under shard_map,
  parallel.AXIS) `batch` is this device's slice of the global batch; it draws
  the global batch's uniforms and keeps its own rows of them, differentiates
  with respect to the rows it gathered, and all-gathers the touched rows and
  their gradients, so every replica applies the update one device would.
  """
  batch = packing.from_padded(batch)
  sampler = None
  if cfg.loss.kind == 'exact':
    grads, stats = exact_row_grads(cfg, state.params, batch)
  else:
    rows = batch.label_BxQ.shape[0]
    num_pos_B = (batch.num_pos_B if axis is None
                 else jax.lax.all_gather(batch.num_pos_B, axis, tiled=True))
    u_BxK = objective.draw_uniforms(cfg, jax.random.fold_in(state.key, state.step), num_pos_B)
    if axis is not None and not cfg.draws_shared:  # this device's rows of the global batch's draws
      u_BxK = jax.lax.dynamic_slice_in_dim(u_BxK, jax.lax.axis_index(axis) * rows, rows)
    sampler = objective.current_sampler(cfg, state.sampler, state.params.W_YxD, state.step,
                                        num_pos_B.shape[0] * batch.label_BxQ.shape[1])
    grads, stats = sampled_row_grads(cfg, state.params, batch, u_BxK, sampler)
  if axis is not None:
    grads = RowGrads(*(parallel.combine(g) for g in grads))
    stats = jax.tree.map(lambda s: jax.lax.psum(s, axis), stats)
  return apply_row_grads(cfg, state, grads, sampler), stats


def make_train_step(cfg: StepConfig):
  """The jitted step with the state donated (its tables are updated in place)."""
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)


def has_local_step(cfg: StepConfig) -> bool:
  """Whether N devices' slices of a batch give one device's update: not for
  the exact rank's label rows gathered under Adagrad (each device's pieces
  would be its slice's per-row sums, whose Adagrad terms differ)."""
  return not (cfg.loss.kind == 'exact' and cfg.optim.kind == 'adagrad'
              and not table_reads.choose(cfg, batch_size=1, positives_per_row=1, num_slots=1,
                                         num_features=1).labels)  # exact's label choice reads no shapes


def local_train_step(cfg: StepConfig):
  """The per-device step of data parallelism (under shard_map, axis
  parallel.AXIS): `step_body` on its slice; N devices give the parameters one gives."""
  if not has_local_step(cfg):
    raise ValueError("loss kind='exact' with Adagrad on several devices needs the labels read "
                     "whole (model.tables 'by_size', 'labels' or 'whole'; Y ≤ loss.label_chunk)")
  return precision.with_precision(cfg.model.matmul_precision)(
      functools.partial(step_body, cfg, axis=parallel.AXIS))


def make_parallel_train_step(cfg: StepConfig, mesh):
  """The jitted, donated data-parallel step: (state, sharded batch) -> (state, stats)."""
  return parallel.make_sharded_step(local_train_step(cfg), mesh)

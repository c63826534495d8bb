"""TrainState and the jitted, donated WSABIE training step.

A batch holds B positive pairs (x, y) with static shapes:
  feat_idx_BxF, feat_val_BxF  the image's non-zeros, padded with value 0;
  label_B                     the positive y of this pair;
  pos_BxP, num_pos_B          all of the image's positives, sorted, padded with Y
                              (negatives must avoid every one of them);
  weight_B                    1 for real pairs, 0 for padding.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax import model, row_optim, samplers, warp

LOSSES = ('warp', 'auc', 'exact')


class TrainState(NamedTuple):
  step: jax.Array
  params: model.Params
  acc_V_d: jax.Array  # row-wise Adagrad accumulators (empty for SGD)
  acc_W_Y: jax.Array
  key: jax.Array      # raw uint32[2]; the step's key is fold_in(key, step)


@dataclasses.dataclass(frozen=True)
class StepConfig:
  num_labels: int
  loss: str = 'warp'            # 'warp' (Alg. 1), 'auc' (one uniform negative), 'exact' (OWPC-SGD)
  num_draws: int = 100          # K, the fixed budget of parallel draws
  rank_weights: str = 'harmonic'
  rank_estimate: str = 'first_violator'
  violators: str = 'first'      # 'first' (Alg. 1) | 'all': every violator among the K draws
  margin: float = 1.0
  score: str = 'dot'
  optimizer: str = 'sgd'
  learning_rate: float = 0.05
  max_norm: float = 1.0

  def __post_init__(self):
    choices = {'loss': LOSSES, 'score': model.SCORES, 'optimizer': row_optim.OPTIMIZERS,
               'rank_weights': warp.RANK_WEIGHTS, 'rank_estimate': warp.RANK_ESTIMATES,
               'violators': warp.VIOLATORS}
    for field, allowed in choices.items():
      if getattr(self, field) not in allowed:
        raise ValueError(f'{field}={getattr(self, field)!r} is not one of {allowed}')


def init_state(key: jax.Array, num_features: int, cfg: StepConfig, dim: int,
               adagrad_init: float = 0.1) -> TrainState:
  key_init, key_steps = jax.random.split(key)
  params = model.init_params(key_init, num_features, cfg.num_labels, dim, cfg.max_norm)
  return TrainState(
      step=jnp.zeros((), jnp.int32), params=params,
      acc_V_d=row_optim.init_accumulator(num_features, cfg.optimizer, adagrad_init),
      acc_W_Y=row_optim.init_accumulator(cfg.num_labels, cfg.optimizer, adagrad_init),
      key=key_steps)


class RowGrads(NamedTuple):
  """Gradients with respect to the rows a batch touched (DESIGN §2)."""
  V_rows_R: jax.Array
  V_grads_RxD: jax.Array
  W_rows_S: jax.Array
  W_grads_SxD: jax.Array


def draw_negatives(cfg: StepConfig, state: TrainState, batch: dict) -> jax.Array:
  """The step's K uniform draws per pair; its key is fold_in(key, step)."""
  key = jax.random.fold_in(state.key, state.step)
  num_draws = 1 if cfg.loss == 'auc' else cfg.num_draws
  return samplers.uniform_negatives(key, batch['pos_BxP'], batch['num_pos_B'],
                                    cfg.num_labels, num_draws)


def sampled_row_grads(cfg: StepConfig, params: model.Params, batch: dict, neg_BxK: jax.Array):
  """WARP (Alg. 1 with K parallel draws) or AUC on gathered rows: (RowGrads, stats)."""
  V, W = params
  V_rows_BxFxD = V[batch['feat_idx_BxF']]
  W_pos_BxD = W[batch['label_B']]
  image_BxD = model.embed_images(V_rows_BxFxD, batch['feat_val_BxF'])
  pos_score_B = model.score(image_BxD, W_pos_BxD[:, None], cfg.score)[:, 0]
  W_neg_BxKxD = W[neg_BxK]
  neg_scores_BxK = model.score(image_BxD, W_neg_BxKxD, cfg.score)
  if cfg.loss == 'auc':  # margin ranking against one uniform negative (Table 5 "AUC")
    found_B = neg_scores_BxK[:, 0] > pos_score_B - cfg.margin
    pick = warp.Violators(jnp.zeros_like(batch['label_B']), jnp.ones_like(pos_score_B),
                          jnp.ones_like(batch['label_B']), found_B, found_B[:, None])
  else:
    pick = warp.find_violators(pos_score_B, neg_scores_BxK,
                               cfg.num_labels - batch['num_pos_B'], cfg.num_labels,
                               cfg.rank_weights, cfg.rank_estimate, cfg.margin)
  weight_B = pick.weight_B * batch['weight_B']
  if cfg.violators == 'all' and cfg.loss != 'auc':
    # Each of the v violators weighted L(rank)/v: the same expected loss as
    # one uniformly chosen violator (eq. (6)), with less variance.
    num_viol_B = jnp.maximum(jnp.sum(pick.violates_BxK, axis=1), 1)
    neg_weight_BxJ = pick.violates_BxK * (weight_B / num_viol_B)[:, None]
    neg_ids_BxJ, W_neg_BxJxD = neg_BxK, W_neg_BxKxD
  else:  # Alg. 1: the first violator in draw order
    neg_weight_BxJ = weight_B[:, None]
    neg_ids_BxJ = jnp.take_along_axis(neg_BxK, pick.index_B[:, None], 1)
    W_neg_BxJxD = W[neg_ids_BxJ]

  def loss_fn(image_BxD, W_pos_BxD, W_neg_BxJxD):  # eq. (9), summed over pairs
    pos_B = model.score(image_BxD, W_pos_BxD[:, None], cfg.score)[:, 0]
    neg_BxJ = model.score(image_BxD, W_neg_BxJxD, cfg.score)
    return jnp.sum(neg_weight_BxJ * warp.hinge(pos_B[:, None], neg_BxJ, cfg.margin))

  loss, (g_image_BxD, gW_pos, gW_neg) = jax.value_and_grad(loss_fn, (0, 1, 2))(
      image_BxD, W_pos_BxD, W_neg_BxJxD)
  # image = Σ_f x_f V_f, so a feature row's gradient is its value times the
  # image's: formed here, it fuses into the optimiser's reads (no B×F×D buffer).
  gV = batch['feat_val_BxF'][:, :, None] * g_image_BxD[:, None, :]
  real_B = batch['weight_B'] > 0
  stats = {'loss': loss, 'pairs': jnp.sum(real_B),
           'violator_found': jnp.sum(pick.found_B & real_B),
           'draws_to_violator': jnp.sum(jnp.where(pick.found_B & real_B, pick.num_trials_B, 0))}
  grads = RowGrads(batch['feat_idx_BxF'].reshape(-1), gV.reshape(-1, V.shape[1]),
                   jnp.concatenate([batch['label_B'], neg_ids_BxJ.reshape(-1)]),
                   jnp.concatenate([gW_pos, gW_neg.reshape(-1, W.shape[1])]))
  return grads, stats


def exact_row_grads(cfg: StepConfig, params: model.Params, batch: dict):
  """OWPC-SGD: every label scored, all violators updated (eq. (6)); O(B·Y·D)."""
  V, W = params
  B = batch['label_B'].shape[0]
  pos_mask_BxY = jnp.zeros((B, cfg.num_labels + 1), bool)
  pos_mask_BxY = pos_mask_BxY.at[jnp.arange(B)[:, None], batch['pos_BxP']].set(True)[:, :-1]

  def loss_fn(V_rows_BxFxD, W_YxD):
    image_BxD = model.embed_images(V_rows_BxFxD, batch['feat_val_BxF'])
    scores_BxY = model.score_all(image_BxD, W_YxD, cfg.score)
    per_pair = warp.exact_rank_loss(scores_BxY, batch['label_B'], pos_mask_BxY,
                                    cfg.num_labels, cfg.rank_weights, cfg.margin)
    return jnp.sum(batch['weight_B'] * per_pair)

  loss, (gV, gW) = jax.value_and_grad(loss_fn, (0, 1))(V[batch['feat_idx_BxF']], W)
  grads = RowGrads(batch['feat_idx_BxF'].reshape(-1), gV.reshape(-1, V.shape[1]),
                   jnp.arange(cfg.num_labels), gW)
  return grads, {'loss': loss, 'pairs': jnp.sum(batch['weight_B'] > 0)}


def apply_row_grads(cfg: StepConfig, state: TrainState, grads: RowGrads) -> TrainState:
  """The optimiser step on the touched rows only, then their projection."""
  opt = dict(learning_rate=cfg.learning_rate, optimizer=cfg.optimizer, max_norm=cfg.max_norm)
  V, acc_V = row_optim.update_rows(state.params.V_dxD, state.acc_V_d, grads.V_rows_R,
                                   grads.V_grads_RxD, **opt)
  W, acc_W = row_optim.update_rows(state.params.W_YxD, state.acc_W_Y, grads.W_rows_S,
                                   grads.W_grads_SxD, **opt)
  return TrainState(state.step + 1, model.Params(V, W), acc_V, acc_W, state.key)


def train_step(cfg: StepConfig, state: TrainState, batch: dict):
  """One SGD step; touches only the batch's feature rows and label rows."""
  if cfg.loss == 'exact':
    grads, stats = exact_row_grads(cfg, state.params, batch)
  else:
    grads, stats = sampled_row_grads(cfg, state.params, batch, draw_negatives(cfg, state, batch))
  return apply_row_grads(cfg, state, grads), stats


def make_train_step(cfg: StepConfig):
  """The jitted step with the state donated (its tables are updated in place)."""
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)

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

from wsabie_jax import adaptive_sampler, model, row_optim, samplers, warp

LOSSES = ('warp', 'auc', 'exact')
SAMPLERS = ('uniform', 'adaptive')


class TrainState(NamedTuple):
  step: jax.Array
  params: model.Params
  acc_V_d: jax.Array  # row-wise Adagrad accumulators (empty for SGD)
  acc_W_Y: jax.Array
  key: jax.Array      # raw uint32[2]; the step's key is fold_in(key, step)
  sampler: adaptive_sampler.SamplerState | None = None  # VSE-ens lists (sampler='adaptive')


@dataclasses.dataclass(frozen=True)
class StepConfig:
  num_labels: int
  loss: str = 'warp'            # 'warp' (Alg. 1), 'auc' (one negative, plain hinge), 'exact' (OWPC-SGD)
  num_draws: int = 100          # K, the fixed budget of parallel draws
  sampler: str = 'uniform'      # 'uniform' (Alg. 1) | 'adaptive' (VSE-ens, paper 003 Alg. 1)
  rank_scale: float = 0.01      # adaptive: λ relative to Y (mean drawn rank ≈ λ·Y)
  refresh_every_pairs: int = 0  # adaptive: re-sort the lists after this many pairs (0: Y·ln Y)
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
               'violators': warp.VIOLATORS, 'sampler': SAMPLERS}
    for field, allowed in choices.items():
      if getattr(self, field) not in allowed:
        raise ValueError(f'{field}={getattr(self, field)!r} is not one of {allowed}')
    if self.sampler == 'adaptive':
      if self.loss == 'exact':
        raise ValueError("sampler='adaptive' draws negatives; loss='exact' scores every label")
      if self.loss == 'warp' and (self.violators, self.rank_estimate) != ('all', 'violator_count'):
        raise ValueError("sampler='adaptive' with loss='warp' weights every violator by importance "
                         "(warp.importance_weights): set violators='all', rank_estimate='violator_count'")
      if not 0 < self.rank_scale <= 1:
        raise ValueError(f'rank_scale={self.rank_scale} must be in (0, 1] (λ relative to Y)')

  @property
  def draws_per_pair(self) -> int:
    # AUC with uniform draws needs one; adaptive draws may hit positives, so
    # AUC takes the first of K that is not (rejection with a fixed budget).
    return 1 if self.loss == 'auc' and self.sampler == 'uniform' else self.num_draws


def init_state(key: jax.Array, num_features: int, cfg: StepConfig, dim: int,
               adagrad_init: float = 0.1) -> TrainState:
  key_init, key_steps = jax.random.split(key)
  params = model.init_params(key_init, num_features, cfg.num_labels, dim, cfg.max_norm)
  step = jnp.zeros((), jnp.int32)
  return TrainState(
      step=step, params=params,
      acc_V_d=row_optim.init_accumulator(num_features, cfg.optimizer, adagrad_init),
      acc_W_Y=row_optim.init_accumulator(cfg.num_labels, cfg.optimizer, adagrad_init),
      key=key_steps,
      sampler=adaptive_sampler.refresh(params.W_YxD, 0) if cfg.sampler == 'adaptive' else None)


class RowGrads(NamedTuple):
  """Gradients with respect to the rows a batch touched (DESIGN §2)."""
  V_rows_R: jax.Array
  V_grads_RxD: jax.Array
  W_rows_S: jax.Array
  W_grads_SxD: jax.Array


def draw_uniforms(cfg: StepConfig, key: jax.Array, num_pos_B: jax.Array) -> jax.Array:
  """The randomness of the step's draws, B-leading (a data-parallel step slices it)."""
  if cfg.sampler == 'adaptive':
    return adaptive_sampler.draw_uniforms(key, num_pos_B.shape[0], cfg.draws_per_pair)
  return samplers.uniform_draws(key, num_pos_B, cfg.num_labels, cfg.draws_per_pair)


def sampled_row_grads(cfg: StepConfig, params: model.Params, batch: dict, u_BxK: jax.Array,
                      sampler: adaptive_sampler.SamplerState | None = None):
  """WARP (Alg. 1 with K parallel draws) or AUC on gathered rows: (RowGrads, stats).

  `u_BxK` are the draws' uniforms (`draw_uniforms`); the negatives are made from
  them here, the adaptive ones from the image's embedding.
  """
  V, W = params
  V_rows_BxFxD = V[batch['feat_idx_BxF']]
  W_pos_BxD = W[batch['label_B']]
  image_BxD = model.embed_images(V_rows_BxFxD, batch['feat_val_BxF'])
  pos_score_B = model.score(image_BxD, W_pos_BxD[:, None], cfg.score)[:, 0]
  if cfg.sampler == 'adaptive':
    neg_BxK = adaptive_sampler.draw(sampler, image_BxD, u_BxK, cfg.rank_scale)
    valid_BxK = ~samplers.is_positive(neg_BxK, batch['pos_BxP'])
  else:
    neg_BxK = samplers.skip_positives(u_BxK, batch['pos_BxP'])
    valid_BxK = jnp.ones(neg_BxK.shape, bool)
  W_neg_BxKxD = W[neg_BxK]
  neg_scores_BxK = model.score(image_BxD, W_neg_BxKxD, cfg.score)
  num_negatives_B = cfg.num_labels - batch['num_pos_B']
  if cfg.loss == 'auc':  # plain hinge against one negative (Table 5 "AUC"; paper 003 Alg. 1 l. 20)
    first_B = jnp.argmax(valid_BxK, axis=1)
    first_score_B = jnp.take_along_axis(neg_scores_BxK, first_B[:, None], 1)[:, 0]
    found_B = jnp.any(valid_BxK, axis=1) & (first_score_B > pos_score_B - cfg.margin)
    pick = warp.Violators(first_B, jnp.ones_like(pos_score_B), first_B + 1, found_B,
                          found_B[:, None])
  else:
    pick = warp.find_violators(pos_score_B, neg_scores_BxK, num_negatives_B, cfg.num_labels,
                               cfg.rank_weights, cfg.rank_estimate, cfg.margin, valid_BxK)
  weight_B = pick.weight_B * batch['weight_B']
  if cfg.sampler == 'adaptive' and cfg.loss == 'warp':
    # image_BxD is a leaf of loss_fn below, so no gradient flows through q.
    proposal_BxK = adaptive_sampler.proposal_prob(sampler, image_BxD, neg_BxK, cfg.rank_scale)
    _, neg_weight_BxJ = warp.importance_weights(pick.violates_BxK, proposal_BxK,
                                                num_negatives_B, cfg.num_labels, cfg.rank_weights)
    neg_weight_BxJ = neg_weight_BxJ * batch['weight_B'][:, None]
    neg_ids_BxJ, W_neg_BxJxD = neg_BxK, W_neg_BxKxD
  elif cfg.violators == 'all' and cfg.loss == 'warp':
    # Each of the v violators weighted L(rank)/v: the same expected loss as
    # one uniformly chosen violator (eq. (6)), with less variance.
    num_viol_B = jnp.maximum(jnp.sum(pick.violates_BxK, axis=1), 1)
    neg_weight_BxJ = pick.violates_BxK * (weight_B / num_viol_B)[:, None]
    neg_ids_BxJ, W_neg_BxJxD = neg_BxK, W_neg_BxKxD
  else:  # Alg. 1: the first violator in draw order
    neg_weight_BxJ = (weight_B * pick.found_B)[:, None]
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


def apply_row_grads(cfg: StepConfig, state: TrainState, grads: RowGrads,
                    sampler: adaptive_sampler.SamplerState | None = None) -> TrainState:
  """The optimiser step on the touched rows only, then their projection."""
  opt = dict(learning_rate=cfg.learning_rate, optimizer=cfg.optimizer, max_norm=cfg.max_norm)
  V, acc_V = row_optim.update_rows(state.params.V_dxD, state.acc_V_d, grads.V_rows_R,
                                   grads.V_grads_RxD, **opt)
  W, acc_W = row_optim.update_rows(state.params.W_YxD, state.acc_W_Y, grads.W_rows_S,
                                   grads.W_grads_SxD, **opt)
  return TrainState(state.step + 1, model.Params(V, W), acc_V, acc_W, state.key, sampler)


def current_sampler(cfg: StepConfig, state: TrainState, global_batch_size: int):
  """The VSE-ens lists for this step, refreshed every |Y|·log|Y| pairs (Alg. 1 l. 4)."""
  if cfg.sampler != 'adaptive':
    return None
  interval = adaptive_sampler.refresh_interval_steps(
      cfg.num_labels, global_batch_size, cfg.refresh_every_pairs)
  return adaptive_sampler.maybe_refresh(state.sampler, state.params.W_YxD, state.step, interval)


def train_step(cfg: StepConfig, state: TrainState, batch: dict):
  """One SGD step; touches only the batch's feature rows and label rows."""
  if cfg.loss == 'exact':
    grads, stats = exact_row_grads(cfg, state.params, batch)
    return apply_row_grads(cfg, state, grads), stats
  sampler = current_sampler(cfg, state, batch['label_B'].shape[0])
  u_BxK = draw_uniforms(cfg, jax.random.fold_in(state.key, state.step), batch['num_pos_B'])
  grads, stats = sampled_row_grads(cfg, state.params, batch, u_BxK, sampler)
  return apply_row_grads(cfg, state, grads, sampler), stats


def make_train_step(cfg: StepConfig):
  """The jitted step with the state donated (its tables are updated in place)."""
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)

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
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax.wsabie import adaptive_sampler
from wsabie_jax.core import model
from wsabie_jax.core import row_optim
from wsabie_jax.core import samplers
from wsabie_jax.training import parallel
from wsabie_jax.wsabie import warp

LOSSES = ('warp', 'auc', 'exact')
SAMPLERS = ('uniform', 'adaptive')


def _check_choices(section, choices: dict):
  for field, allowed in choices.items():
    if getattr(section, field) not in allowed:
      raise ValueError(f'{type(section).__name__}.{field}={getattr(section, field)!r} '
                       f'is not one of {allowed}')


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  dim: int = 64                 # D
  max_norm: float = 1.0         # C in eqs. (2)–(3)
  score: str = 'dot'            # 'dot' | 'neg_euclidean' (paper 001) | 'neg_sq_euclidean'

  def __post_init__(self):
    _check_choices(self, {'score': model.SCORES})


@dataclasses.dataclass(frozen=True)
class LossConfig:
  kind: str = 'warp'            # 'warp' (Alg. 1) | 'auc' (one negative, plain hinge) | 'exact' (OWPC-SGD)
  num_draws: int = 100          # K, the fixed budget of parallel draws
  sampler: str = 'uniform'      # 'uniform' (Alg. 1) | 'adaptive' (VSE-ens, paper 003 Alg. 1)
  rank_scale: float = 0.01      # adaptive: λ relative to Y (mean drawn rank ≈ λ·Y)
  refresh_every_pairs: int = 0  # adaptive: re-sort the lists after this many pairs (0: Y·ln Y)
  rank_weights: str = 'harmonic'  # α_j = 1/j | 'mean_rank' | 'top1'
  rank_estimate: str = 'first_violator'  # ⌊(Y−1)/N⌋ | 'violator_count'
  violators: str = 'first'      # 'first' (Alg. 1) | 'all': every violator among the K draws
  margin: float = 1.0

  def __post_init__(self):
    _check_choices(self, {'kind': LOSSES, 'rank_weights': warp.RANK_WEIGHTS,
                          'rank_estimate': warp.RANK_ESTIMATES, 'violators': warp.VIOLATORS,
                          'sampler': SAMPLERS})
    if self.sampler == 'adaptive':
      if self.kind == 'exact':
        raise ValueError("sampler='adaptive' draws negatives; loss kind='exact' scores every label")
      if self.kind == 'warp' and (self.violators, self.rank_estimate) != ('all', 'violator_count'):
        raise ValueError("sampler='adaptive' with loss kind='warp' weights every violator by "
                         "importance (warp.importance_weights): set violators='all', "
                         "rank_estimate='violator_count'")
      if not 0 < self.rank_scale <= 1:
        raise ValueError(f'rank_scale={self.rank_scale} must be in (0, 1] (λ relative to Y)')


@dataclasses.dataclass(frozen=True)
class OptimConfig:
  kind: str = 'adagrad'         # row-wise Adagrad | 'sgd' (a fixed rate, as the paper)
  learning_rate: float = 0.1
  adagrad_init: float = 0.1

  def __post_init__(self):
    _check_choices(self, {'kind': row_optim.OPTIMIZERS})


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """WSABIE's settings; the config sections model, loss and optim, field for field."""
  num_labels: int               # Y, read from the data
  model: ModelConfig = ModelConfig()
  loss: LossConfig = LossConfig()
  optim: OptimConfig = OptimConfig()

  @property
  def draws_per_pair(self) -> int:
    # AUC with uniform draws needs one; adaptive draws may hit positives, so
    # AUC takes the first of K that is not (rejection with a fixed budget).
    return 1 if self.loss.kind == 'auc' and self.loss.sampler == 'uniform' else self.loss.num_draws


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
                             cfg.model.max_norm)
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


# ---- drawing negatives: (ids_BxK, valid_BxK), chosen once by cfg.loss.sampler

def uniform_negatives(cfg, sampler, image_BxD, batch, u_BxK):
  """Alg. 1 l. 7: uniform over the labels that are not the image's positives."""
  neg_BxK = samplers.skip_positives(u_BxK, batch['pos_BxP'])
  return neg_BxK, jnp.ones(neg_BxK.shape, bool)


def adaptive_negatives(cfg, sampler, image_BxD, batch, u_BxK):
  """Paper 003 Alg. 1 ll. 12–18; draws that hit a positive are rejected (masked)."""
  neg_BxK = adaptive_sampler.draw(sampler, image_BxD, u_BxK, cfg.loss.rank_scale)
  return neg_BxK, ~samplers.is_positive(neg_BxK, batch['pos_BxP'])


# ---- weighing the draws of one pair: (which draws J, their weights J, stats)

def first_valid_draw(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K):
  """AUC (paper 000 Table 5; paper 003 Alg. 1 l. 20): the plain hinge against
  the first draw that is not a positive, counted when it violates."""
  first = jnp.argmax(valid_K)
  found = jnp.any(valid_K) & (neg_scores_K[first] > pos_score - cfg.loss.margin)
  return first[None], found.astype(jnp.float32)[None], (found, first + 1)


def _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K) -> warp.Violators:
  return warp.find_violator(pos_score, neg_scores_K, num_negatives, valid_K,
                            num_labels=cfg.num_labels, rank_weights=cfg.loss.rank_weights,
                            rank_estimate=cfg.loss.rank_estimate, margin=cfg.loss.margin)


def first_violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K):
  """Alg. 1: the first violator in draw order, weighted L(⌊(Y−1)/N⌋)."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K)
  return pick.index_B[None], (pick.weight_B * pick.found_B)[None], (pick.found_B, pick.num_trials_B)


def every_violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K):
  """Each of the v violators weighted L(rank)/v: the same expected loss as one
  uniformly chosen violator (eq. (6)), with less variance."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K)
  weight_K = pick.violates_BxK * pick.weight_B / jnp.maximum(jnp.sum(pick.violates_BxK), 1)
  return jnp.arange(neg_scores_K.shape[0]), weight_K, (pick.found_B, pick.num_trials_B)


def importance_weighted(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K):
  """VSE-ens + WARP: every violator, weighted by 1/q (warp.importance_weight)."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K)
  _, weight_K = warp.importance_weight(pick.violates_BxK, proposal_K, num_negatives,
                                       num_labels=cfg.num_labels,
                                       rank_weights=cfg.loss.rank_weights)
  return jnp.arange(neg_scores_K.shape[0]), weight_K, (pick.found_B, pick.num_trials_B)


def choose_objective(cfg: StepConfig):
  """(negative source, per-pair weigher) for the configured loss and sampler."""
  draw = adaptive_negatives if cfg.loss.sampler == 'adaptive' else uniform_negatives
  if cfg.loss.kind == 'auc':
    return draw, first_valid_draw
  if cfg.loss.sampler == 'adaptive':
    return draw, importance_weighted
  return draw, every_violator if cfg.loss.violators == 'all' else first_violator


def pair_loss(cfg: StepConfig, image_D, W_pos_D, W_neg_JxD, weight_J) -> jax.Array:
  """Σ_j w_j·|margin − f_y(x) + f_ȳj(x)|₊ for one pair: eq. (9) with its weights."""
  pos = model.score_one(image_D, W_pos_D[None], cfg.model.score)[0]
  neg_J = model.score_one(image_D, W_neg_JxD, cfg.model.score)
  return jnp.sum(weight_J * warp.hinge(pos, neg_J, cfg.loss.margin))


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
  V_rows_BxFxD = V[batch['feat_idx_BxF']]
  W_pos_BxD = W[batch['label_B']]
  image_BxD = model.embed_images(V_rows_BxFxD, batch['feat_val_BxF'])
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
  # image = Σ_f x_f V_f, so a feature row's gradient is its value times the
  # image's: formed here, it fuses into the optimiser's reads (no B×F×D buffer).
  gV = batch['feat_val_BxF'][:, :, None] * g_image_BxD[:, None, :]
  real_B = batch['weight_B'] > 0
  stats = {'loss': loss, 'pairs': jnp.sum(real_B),
           'violator_found': jnp.sum(found_B & real_B),
           'draws_to_violator': jnp.sum(jnp.where(found_B & real_B, trials_B, 0))}
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
    scores_BxY = model.score_all(image_BxD, W_YxD, cfg.model.score)
    per_pair = warp.exact_rank_loss(scores_BxY, batch['label_B'], pos_mask_BxY,
                                    cfg.num_labels, cfg.loss.rank_weights, cfg.loss.margin)
    return jnp.sum(batch['weight_B'] * per_pair)

  loss, (gV, gW) = jax.value_and_grad(loss_fn, (0, 1))(V[batch['feat_idx_BxF']], W)
  grads = RowGrads(batch['feat_idx_BxF'].reshape(-1), gV.reshape(-1, V.shape[1]),
                   jnp.arange(cfg.num_labels), gW)
  return grads, {'loss': loss, 'pairs': jnp.sum(batch['weight_B'] > 0)}


def apply_row_grads(cfg: StepConfig, state: TrainState, grads: RowGrads,
                    sampler: adaptive_sampler.SamplerState | None = None) -> TrainState:
  """The optimiser step on the touched rows only, then their projection."""
  opt = dict(learning_rate=cfg.optim.learning_rate, optimizer=cfg.optim.kind,
             max_norm=cfg.model.max_norm)
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
  """One SGD step; touches only the batch's feature rows and label rows."""
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


def make_parallel_train_step(cfg: StepConfig, mesh):
  """The jitted, donated data-parallel step: (state, sharded batch) -> (state, stats).

  Each device scores its slice of the batch and differentiates with respect
  to the rows it gathered; the touched rows and their gradients are
  all-gathered and every replica applies the same update. The draws are the
  single-device step's, sliced, so N devices give the parameters one gives.
  """
  if cfg.loss.kind == 'exact':
    raise ValueError("the exact-rank reference (loss kind='exact') runs on one device only")
  axis = parallel.AXIS

  def local_step(state: TrainState, batch: dict):
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

  return parallel.make_sharded_step(local_step, mesh)

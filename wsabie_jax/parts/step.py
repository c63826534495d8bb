"""Objects and parts (paper 002 §3, §4.3.3, §6.2): the quadruplet model and its step.

f_q(Io, Lo, Ip, Lp) = f_I(Io, Lo) + f_I(Ip, Lp) + α f_L(Lo, Lp), with
f_I(I, L) = (V Φ(I))·T_L and f_L(Lo, Lp) = W_Lo·W_Lp. "Shared" models score
images against W itself (T = W); "Unshared" ones against a second table
(T = U, f_I^U). Both train the full f_q (α = 0.1); "Image-Word" and "Image"
are two ways to *score* a trained model, with or without α f_L (§6.2:
"Shared (Image) ... will perform a gradient step on W with respect to
(Lp, Lo)"), each with its own model selection (parts_eval.py).

A step (§4.3.3): for each quadruplet, constraint (6) (replace Lo) or (7)
(replace Lp) at random; candidates L′ drawn uniformly among the other labels,
γ of them in parallel, the first that violates the margin taken (Alg. 1 capped
at γ, as WARP here); with α_1 = 1 the rank weight E(⌊γ/N⌋) is 1 whenever a
violator is found, so the loss is that violator's hinge. Only the rows used
are updated (row-sparse, docs/DESIGN.md §1) and projected into the unit ball
(‖W_i‖, ‖V_i‖ ≤ 1, step 6).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax.core import model
from wsabie_jax.core import precision
from wsabie_jax.core import row_optim
from wsabie_jax.core import samplers
from wsabie_jax.parts.settings import (PartsConfig, PartsLoss, PartsModel,  # noqa: F401 (the
                                       PartsOptim)                          # method's names)
from wsabie_jax.wsabie import warp


class PartsParams(NamedTuple):
  V_dxD: jax.Array
  W_KxD: jax.Array   # label embeddings of f_L (and of f_I when shared)
  U_KxD: jax.Array   # f_I's label embeddings when unshared (1×D placeholder when shared)


class PartsState(NamedTuple):
  step: jax.Array
  params: PartsParams
  acc_V: jax.Array
  acc_W: jax.Array
  acc_U: jax.Array
  key: jax.Array
  rate_scale: jax.Array  # f32[]: the learning rates' multiplier (wsabie/step.py TrainState)


def image_table(cfg: PartsConfig, params: PartsParams) -> jax.Array:
  return params.W_KxD if cfg.model.shared else params.U_KxD


@functools.partial(jax.jit, static_argnums=(1, 2))  # one program (wsabie/step.py init_state)
def init_state(key: jax.Array, cfg: PartsConfig, num_features: int) -> PartsState:
  """N(0, 1/√d) init in the ball (paper 002 §4.2)."""
  key_init, key_u, key_steps = jax.random.split(key, 3)
  dim, max_norm = cfg.model.dim, cfg.model.max_norm
  V, W = model.init_params(key_init, num_features, cfg.num_labels, dim, max_norm)
  U = (model.init_params(key_u, 1, cfg.num_labels, dim, max_norm).W_YxD
       if not cfg.model.shared else jnp.zeros((1, dim)))
  acc = lambda n: row_optim.init_accumulator(n, cfg.optim.kind, cfg.optim.adagrad_init)
  return PartsState(jnp.zeros((), jnp.int32), PartsParams(V, W, U), acc(num_features),
                    acc(cfg.num_labels), acc(U.shape[0]), key_steps, jnp.ones((), jnp.float32))


def constraint_scores(alpha: float, image_D, T_true_D, T_cand_KxD, W_other_D, W_true_D,
                      W_cand_KxD):
  """One quadruplet's f_q with its true label and with each of K candidates in
  its place: f_q differs only in the replaced label's two terms, f_I and α f_L."""
  pos = image_D @ T_true_D + alpha * (W_other_D @ W_true_D)
  cand_K = T_cand_KxD @ image_D + alpha * (W_cand_KxD @ W_other_D)
  return pos, cand_K


def quadruplet_loss(alpha: float, margin: float, weight, image_D, T_true_D, T_viol_D, W_other_D,
                    W_true_D, W_viol_D) -> jax.Array:
  """§4.3.3 step 5: E(⌊γ/N⌋)·|margin − f_q(x) + f_q(x̃)|₊, `weight` = E (0: no violator)."""
  pos, viol = constraint_scores(alpha, image_D, T_true_D, T_viol_D[None], W_other_D, W_true_D,
                                W_viol_D[None])
  return weight * warp.hinge(pos, viol[0], margin)


def train_step(cfg: PartsConfig, state: PartsState, batch: dict):
  """The step traced under the configured matmul precision (core/precision.py)."""
  with precision.scope(cfg.model.matmul_precision):
    return _train_step(cfg, state, batch)


def _train_step(cfg: PartsConfig, state: PartsState, batch: dict):
  """One step over B quadruplets; touches only the rows they use.

  Per quadruplet (§4.3.3): constraint (6) (replace Lo) or (7) (replace Lp) at
  random; γ candidates uniform over the other labels, scored at once, the
  first violator taken (warp.find_violator with α_1 = 1: weight 1 when found).
  """
  key_c, key_n = jax.random.split(jax.random.fold_in(state.key, state.step))
  obj_label, part_label = batch['obj_label_B'], batch['part_label_B']
  B = obj_label.shape[0]
  # Constraint (7) (the part's label is replaced) or (6) (the object's), at random.
  replace_part_B = jax.random.bernoulli(key_c, 0.5, (B,))
  img_idx = jnp.where(replace_part_B[:, None], batch['part_idx_BxF'], batch['obj_idx_BxF'])
  img_val = jnp.where(replace_part_B[:, None], batch['part_val_BxF'], batch['obj_val_BxF'])
  true_B = jnp.where(replace_part_B, part_label, obj_label)
  other_B = jnp.where(replace_part_B, obj_label, part_label)
  # γ candidates uniform over the K − 1 labels other than the replaced one.
  one_B = jnp.ones((B,), jnp.int32)
  cand_BxK = samplers.uniform_negatives(key_n, true_B[:, None], one_B, cfg.num_labels,
                                        cfg.loss.num_draws)
  V, W, U = state.params
  T = W if cfg.model.shared else U
  a, margin = cfg.model.alpha, cfg.loss.margin

  image_BxD = model.embed_images(V[img_idx], img_val)
  pos_B, cand_BxK_scores = jax.vmap(functools.partial(constraint_scores, a))(
      image_BxD, T[true_B], T[cand_BxK], W[other_B], W[true_B], W[cand_BxK])
  pick = warp.find_violators(pos_B, cand_BxK_scores, cfg.num_labels - one_B, cfg.num_labels,
                             rank_weights='top1', margin=margin, min_negatives=cfg.num_labels - 1)
  found_B = pick.found_B & (batch['weight_B'] > 0)
  # §4.3.3 step 5: the hinge weighted E(⌊γ/N⌋) with α_1 = 1, α_j>1 = 0, which
  # is 1 whenever a violator is found (its rank estimate is at least 1).
  weight_B = jnp.where(found_B, pick.weight_B, 0.0)
  viol_label_B = jnp.take_along_axis(cand_BxK, pick.index_B[:, None], 1)[:, 0]

  def loss_fn(image_BxD, T_true, T_viol, W_other, W_true, W_viol):
    return jnp.sum(jax.vmap(functools.partial(quadruplet_loss, a, margin))(
        weight_B, image_BxD, T_true, T_viol, W_other, W_true, W_viol))

  args = (image_BxD, T[true_B], T[viol_label_B], W[other_B], W[true_B], W[viol_label_B])
  loss, (g_img, g_T_true, g_T_viol, g_W_other, g_W_true, g_W_viol) = jax.value_and_grad(
      loss_fn, tuple(range(6)))(*args)
  opt = dict(optimizer=cfg.optim.kind, max_norm=cfg.model.max_norm)
  lr_W = cfg.optim.learning_rate_W * state.rate_scale
  gV = img_val[:, :, None] * g_img[:, None, :]
  V, acc_V = row_optim.update_rows(V, state.acc_V, img_idx.reshape(-1), gV.reshape(-1, V.shape[1]),
                                   learning_rate=cfg.optim.learning_rate_V * state.rate_scale, **opt)
  T_rows = jnp.concatenate([true_B, viol_label_B])
  T_grads = jnp.concatenate([g_T_true, g_T_viol])
  W_rows, W_grads = [other_B, true_B, viol_label_B], [g_W_other, g_W_true, g_W_viol]
  if cfg.model.shared:  # one table: its f_I and f_L pieces in one update
    W_rows, W_grads = [T_rows] + W_rows, [T_grads] + W_grads
  W, acc_W = row_optim.update_rows(W, state.acc_W, jnp.concatenate(W_rows),
                                   jnp.concatenate(W_grads), learning_rate=lr_W, **opt)
  acc_U = state.acc_U
  if not cfg.model.shared:
    U, acc_U = row_optim.update_rows(U, state.acc_U, T_rows, T_grads, learning_rate=lr_W, **opt)
  stats = {'loss': loss, 'pairs': jnp.sum(batch['weight_B'] > 0), 'violator_found': jnp.sum(found_B),
           'nonfinite': jnp.sum(~jnp.isfinite(pos_B)) + jnp.sum(~jnp.isfinite(cand_BxK_scores)),
           'draws_to_violator': jnp.sum(jnp.where(found_B, pick.num_trials_B, 0))}
  return state._replace(step=state.step + 1, params=PartsParams(V, W, U), acc_V=acc_V, acc_W=acc_W,
                        acc_U=acc_U), stats


def make_train_step(cfg: PartsConfig):
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)

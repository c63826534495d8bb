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
are updated (row-sparse, DESIGN §2) and projected into the unit ball
(‖W_i‖, ‖V_i‖ ≤ 1, step 6).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax import model, row_optim


@dataclasses.dataclass(frozen=True)
class PartsConfig:
  num_labels: int               # K
  shared: bool = True           # f_I reads W (Shared) or its own U (Unshared)
  alpha: float = 0.1            # f_L's weight in f_q (§6.2)
  num_draws: int = 100          # γ
  margin: float = 1.0
  optimizer: str = 'adagrad'
  learning_rate_V: float = 0.05
  learning_rate_W: float = 0.05
  max_norm: float = 1.0


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


def image_table(cfg: PartsConfig, params: PartsParams) -> jax.Array:
  return params.W_KxD if cfg.shared else params.U_KxD


def init_state(key: jax.Array, cfg: PartsConfig, num_features: int, dim: int,
               adagrad_init: float = 0.1) -> PartsState:
  """N(0, 1/√d) init in the ball (paper 002 §4.2)."""
  key_init, key_u, key_steps = jax.random.split(key, 3)
  V, W = model.init_params(key_init, num_features, cfg.num_labels, dim, cfg.max_norm)
  U = (model.init_params(key_u, 1, cfg.num_labels, dim, cfg.max_norm).W_YxD
       if not cfg.shared else jnp.zeros((1, dim)))
  acc = lambda n: row_optim.init_accumulator(n, cfg.optimizer, adagrad_init)
  return PartsState(jnp.zeros((), jnp.int32), PartsParams(V, W, U), acc(num_features),
                    acc(cfg.num_labels), acc(U.shape[0]), key_steps)


def train_step(cfg: PartsConfig, state: PartsState, batch: dict):
  """One step over B quadruplets; touches only the rows they use."""
  key_c, key_n = jax.random.split(jax.random.fold_in(state.key, state.step))
  obj_label, part_label = batch['obj_label_B'], batch['part_label_B']
  B = obj_label.shape[0]
  # Constraint (7) (the part's label is replaced) or (6) (the object's), at random.
  replace_part_B = jax.random.bernoulli(key_c, 0.5, (B,))
  img_idx = jnp.where(replace_part_B[:, None], batch['part_idx_BxF'], batch['obj_idx_BxF'])
  img_val = jnp.where(replace_part_B[:, None], batch['part_val_BxF'], batch['obj_val_BxF'])
  true_B = jnp.where(replace_part_B, part_label, obj_label)
  other_B = jnp.where(replace_part_B, obj_label, part_label)
  # γ candidates uniform over the K − 1 other labels.
  u_BxK = jax.random.randint(key_n, (B, cfg.num_draws), 0, cfg.num_labels - 1)
  neg_label_BxK = u_BxK + (u_BxK >= true_B[:, None])
  V, W, U = state.params
  T = W if cfg.shared else U
  a = cfg.alpha

  def scores(image_BxD, T_true_BxD, T_neg_BxKxD, W_other_BxD, W_true_BxD, W_neg_BxKxD):
    # f_q differs between x and x̃ only in the replaced label's two terms.
    pos_B = jnp.sum(image_BxD * T_true_BxD, -1) + a * jnp.sum(W_other_BxD * W_true_BxD, -1)
    neg_BxK = (jnp.einsum('bd,bkd->bk', image_BxD, T_neg_BxKxD)
               + a * jnp.einsum('bd,bkd->bk', W_other_BxD, W_neg_BxKxD))
    return pos_B, neg_BxK

  image_BxD = model.embed_images(V[img_idx], img_val)
  pos_B, neg_BxK = scores(image_BxD, T[true_B], T[neg_label_BxK], W[other_B], W[true_B],
                          W[neg_label_BxK])
  violates_BxK = neg_BxK > pos_B[:, None] - cfg.margin
  found_B = jnp.any(violates_BxK, 1) & (batch['weight_B'] > 0)
  first_B = jnp.argmax(violates_BxK, 1)
  viol_label_B = jnp.take_along_axis(neg_label_BxK, first_B[:, None], 1)[:, 0]

  def loss_fn(image_BxD, T_true, T_viol, W_other, W_true, W_viol):  # §4.3.3 step 5, α_1 = 1
    pos, neg = scores(image_BxD, T_true, T_viol[:, None], W_other, W_true, W_viol[:, None])
    return jnp.sum(found_B * jnp.maximum(0.0, cfg.margin - pos + neg[:, 0]))

  args = (image_BxD, T[true_B], T[viol_label_B], W[other_B], W[true_B], W[viol_label_B])
  loss, (g_img, g_T_true, g_T_viol, g_W_other, g_W_true, g_W_viol) = jax.value_and_grad(
      loss_fn, tuple(range(6)))(*args)
  opt = dict(optimizer=cfg.optimizer, max_norm=cfg.max_norm)
  gV = img_val[:, :, None] * g_img[:, None, :]
  V, acc_V = row_optim.update_rows(V, state.acc_V, img_idx.reshape(-1), gV.reshape(-1, V.shape[1]),
                                   learning_rate=cfg.learning_rate_V, **opt)
  T_rows = jnp.concatenate([true_B, viol_label_B])
  T_grads = jnp.concatenate([g_T_true, g_T_viol])
  W_rows, W_grads = [other_B, true_B, viol_label_B], [g_W_other, g_W_true, g_W_viol]
  if cfg.shared:  # one table: its f_I and f_L pieces in one update
    W_rows, W_grads = [T_rows] + W_rows, [T_grads] + W_grads
  W, acc_W = row_optim.update_rows(W, state.acc_W, jnp.concatenate(W_rows),
                                   jnp.concatenate(W_grads), learning_rate=cfg.learning_rate_W, **opt)
  acc_U = state.acc_U
  if not cfg.shared:
    U, acc_U = row_optim.update_rows(U, state.acc_U, T_rows, T_grads,
                                     learning_rate=cfg.learning_rate_W, **opt)
  stats = {'loss': loss, 'pairs': jnp.sum(batch['weight_B'] > 0), 'violator_found': jnp.sum(found_B),
           'draws_to_violator': jnp.sum(jnp.where(found_B, first_B + 1, 0))}
  return PartsState(state.step + 1, PartsParams(V, W, U), acc_V, acc_W, acc_U, state.key), stats


def make_train_step(cfg: PartsConfig):
  return jax.jit(lambda state, batch: train_step(cfg, state, batch), donate_argnums=0)

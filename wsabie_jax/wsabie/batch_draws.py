"""WARP's draws shared by a batch's rows (loss.draws='per_batch').

Alg. 1 draws each pair's negatives for it alone; the fixed-budget step draws
K per row (docs/DESIGN.md §2) and gathers them: B·K label rows a step, moved
through a gather, a score, a gradient and a scatter each. With many labels
(12k tags: B·K·D = 13M floats a step) those moves are the step. Here the
batch draws K labels once, uniformly over all Y, and every row scores all of
them by one B×K matmul; their gradients are the matmul's transposes, so the
step reads and writes K label rows plus the rows' positives.

Each row's draws are still what Alg. 1 makes. A draw that hits one of the
row's positives is no trial for it (`valid`); the others are i.i.d. uniform
over the row's negatives, and warp.find_violator counts N and the violators
over them alone. So a pair's first violator, its N and its rank estimate
have Alg. 1's distribution with a budget of the valid draws (K less the hits
on its positives: K·|P|/Y of them on average). What changes is between rows:
the pairs of one batch are compared with the same negatives, so their
updates are correlated within a step (tests/batch_draws_test.py checks the
per-pair weight against paper 000's sequential estimator).

The gradient of a drawn row is one piece, its slopes summed over the B rows;
its Adagrad term is the sum of the rows' pieces' mean squares, as the
per-row step and the whole-table read count them (wsabie/table_reads.py).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from wsabie_jax.core import row_optim, samplers


def draw(key: jax.Array, num_draws: int, num_labels: int) -> jax.Array:
  """K label ids, i.i.d. uniform over all Y (a row's positives are masked later)."""
  return samplers.below(samplers.random_words(key, (num_draws,)), jnp.int32(num_labels))


def negatives(ids_K: jax.Array, pos_BxP: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(each row's draws B×K, whether each is a trial for it: not a positive)."""
  neg_BxK = jnp.broadcast_to(ids_K, (pos_BxP.shape[0], ids_K.shape[0]))
  return neg_BxK, ~samplers.is_positive(neg_BxK, pos_BxP)


def scores(W_YxD: jax.Array, image_BxD: jax.Array, label_BxQ: jax.Array, ids_K: jax.Array):
  """(positives' scores B×Q, the draws' scores B×K, the positives' rows B×Q×D,
  the drawn rows K×D): the rows gathered once, the draws scored by matmul."""
  W_pos_BxQxD, W_drawn_KxD = W_YxD[label_BxQ], W_YxD[ids_K]
  pos_BxQ = jnp.einsum('bd,bqd->bq', image_BxD, W_pos_BxQxD)
  return pos_BxQ, image_BxD @ W_drawn_KxD.T, W_pos_BxQxD, W_drawn_KxD


def label_grads(W_pos_BxQxD: jax.Array, W_drawn_KxD: jax.Array, ids_K: jax.Array,
                image_BxD: jax.Array, label_BxQ: jax.Array, pick_BxM: jax.Array | None,
                loss_of: Callable, pos_BxQ: jax.Array, neg_scores_BxM: jax.Array):
  """(loss, ∂/∂images_BxD, W's RowPieces) of loss_of(positives' scores,
  negatives' scores) (step.draws_loss): the M weighed draws of each row are
  its K draws in order (`pick_BxM` None) or the picked positions."""
  loss, (slope_BxQ, slope_BxM) = jax.value_and_grad(loss_of, (0, 1))(pos_BxQ, neg_scores_BxM)
  B, K, D = image_BxD.shape[0], ids_K.shape[0], image_BxD.shape[1]
  slope_BxK = (slope_BxM if pick_BxM is None else
               jnp.zeros((B, K)).at[jnp.arange(B)[:, None], pick_BxM].add(slope_BxM))
  sq_image_B = jnp.mean(jnp.square(image_BxD), -1)  # piece (b, y): slope²·mean(image_b²)
  g_image_BxD = slope_BxK @ W_drawn_KxD + jnp.einsum('bq,bqd->bd', slope_BxQ, W_pos_BxQxD)
  pieces = row_optim.RowPieces(
      jnp.concatenate([label_BxQ.reshape(-1), ids_K]),
      jnp.concatenate([(slope_BxQ[..., None] * image_BxD[:, None]).reshape(-1, D),
                       slope_BxK.T @ image_BxD]),
      jnp.concatenate([(jnp.square(slope_BxQ) * sq_image_B[:, None]).reshape(-1),
                       jnp.square(slope_BxK).T @ sq_image_B]))
  return loss, g_image_BxD, pieces

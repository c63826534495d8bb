"""Row-sparse optimisers for embedding tables: SGD and row-wise Adagrad.

A step hands over the rows it gathered and their gradients; only those rows
(and their accumulators) are read, updated, projected (eqs. (2)–(3)) and
written back — O(R·D) per step, never O(rows·D) (DESIGN §2, cost model).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from wsabie_jax import model

OPTIMIZERS = ('sgd', 'adagrad')


def init_accumulator(num_rows: int, optimizer: str, initial_value: float) -> jax.Array:
  """Adagrad keeps one scalar per row; SGD keeps a 1-element placeholder
  (checkpoints cannot hold zero-size arrays)."""
  if optimizer not in OPTIMIZERS:
    raise ValueError(f'optimizer {optimizer!r} is not one of {OPTIMIZERS}')
  size = num_rows if optimizer == 'adagrad' else 1
  return jnp.full((size,), initial_value, jnp.float32)


def dedup_rows(rows_R: jax.Array, grads_RxD: jax.Array, num_rows: int):
  """Sums gradients of repeated rows; unused slots get the id `num_rows`.

  Rows repeat within a batch (a frequent label, a common visual word); the
  minibatch gradient of a row is the sum of its pieces, and scatters below
  must see each row once.
  """
  size = rows_R.shape[0]
  uniq_R, inverse_R = jnp.unique(rows_R, size=size, fill_value=num_rows, return_inverse=True)
  grads_RxD = jax.ops.segment_sum(grads_RxD, inverse_R.reshape(-1), num_segments=size)
  return uniq_R, grads_RxD


def update_rows(table_NxD: jax.Array, acc_N: jax.Array, rows_R: jax.Array,
                grads_RxD: jax.Array, *, learning_rate: float, optimizer: str,
                max_norm: float, unique: bool = False, eps: float = 1e-10):
  """One optimiser step on the given rows, then projection into the ball.

  Returns the new table and accumulator; the caller donates the old ones so
  the scatters happen in place.
  """
  num_rows = table_NxD.shape[0]
  if not unique:
    rows_R, grads_RxD = dedup_rows(rows_R, grads_RxD, num_rows)
  old_RxD = table_NxD.at[rows_R].get(mode='fill', fill_value=0.0)
  if optimizer == 'sgd':
    new_RxD = old_RxD - learning_rate * grads_RxD
  elif optimizer == 'adagrad':
    acc_R = acc_N.at[rows_R].get(mode='fill', fill_value=1.0)
    acc_R = acc_R + jnp.mean(jnp.square(grads_RxD), axis=-1)
    new_RxD = old_RxD - learning_rate * grads_RxD / (jnp.sqrt(acc_R) + eps)[:, None]
    acc_N = acc_N.at[rows_R].set(acc_R, mode='drop')
  else:
    raise ValueError(f'optimizer {optimizer!r} is not one of {OPTIMIZERS}')
  new_RxD = model.project_rows(new_RxD, max_norm)
  return table_NxD.at[rows_R].set(new_RxD, mode='drop'), acc_N

"""The out-of-vocabulary pass of paper 004 §2.1, eq. (4).

Training moves the word vectors of seen tags V_I and never those of the
words only the text embedding has, V_D, so dot products between the two
lose their meaning. Afterwards, each unseen vector v_d is fitted so that its
sigmoid correlations to every word m of V∪ match the initial ones,
C⁽ⁱ⁾_dm = σ(v⁽ⁱ⁾_d·v⁽ⁱ⁾_m) (eq. (3)), by maximising eq. (4)

  Σ_m C⁽ⁱ⁾_dm log σ(v_d·v_m) + (1 − C⁽ⁱ⁾_dm) log(1 − σ(v_d·v_m)),

a cross-entropy against soft targets. C⁽ⁱ⁾ is never built (paper 004,
footnote 1): each step draws a block of unseen rows and of columns m and
forms the targets from the initial vectors on the fly, O(rows·cols·D). Only
unseen rows are updated (row-wise Adagrad on the rows drawn), each row
fitting its own eq. (4) against the current values of the others.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from wsabie_jax.config.schema import check_ranges
from wsabie_jax.core import row_optim


@dataclasses.dataclass(frozen=True)
class OOVConfig:
  """The out-of-vocabulary pass (config section `oov`); steps = 0 skips it."""
  steps: int = 3000
  rows_per_step: int = 256      # unseen rows fitted per step
  cols_per_step: int = 2048     # words m of eq. (4) per step
  learning_rate: float = 1.0

  def __post_init__(self):
    check_ranges(self, 'oov', steps='>=0', rows_per_step='>=1', cols_per_step='>=1',
                 learning_rate='>0')


def correlation_loss(v_RxD: jax.Array, v_CxD: jax.Array, init_RxD: jax.Array,
                     init_CxD: jax.Array) -> jax.Array:
  """−eq. (4) per row, summed over the C columns: cross-entropy to σ(init·init)."""
  target_RxC = jax.nn.sigmoid(init_RxD @ init_CxD.T)
  s_RxC = v_RxD @ v_CxD.T
  return -jnp.sum(target_RxC * jax.nn.log_sigmoid(s_RxC)
                  + (1 - target_RxC) * jax.nn.log_sigmoid(-s_RxC), axis=1)


@functools.partial(jax.jit, static_argnames=('first_unseen', 'chunk', 'max_rows'))
def mean_loss(words_VxD: jax.Array, initial_VxD: jax.Array, first_unseen: int,
              chunk: int = 1024, max_rows: int = 8192) -> jax.Array:
  """Eq. (4)'s loss averaged over the unseen rows d and all words m, in row chunks.

  Exact up to `max_rows` unseen rows; beyond, over that many evenly spaced ones
  (each row still against every word), so the report costs O(max_rows·V·D).
  """
  V, _ = words_VxD.shape
  rows_R = jnp.arange(first_unseen, V)
  if V - first_unseen > max_rows:
    rows_R = rows_R[::-(-(V - first_unseen) // max_rows)]
  num_rows = rows_R.shape[0]
  num_chunks = -(-num_rows // chunk)
  pad = num_chunks * chunk - num_rows
  rows = jnp.pad(rows_R, (0, pad), constant_values=first_unseen).reshape(num_chunks, chunk)
  keep = (jnp.arange(num_chunks * chunk) < num_rows).reshape(num_chunks, chunk)

  def one(total, xs):
    rows_C, keep_C = xs
    loss_C = correlation_loss(words_VxD[rows_C], words_VxD, initial_VxD[rows_C], initial_VxD)
    return total + jnp.sum(jnp.where(keep_C, loss_C, 0.0)), None

  total, _ = jax.lax.scan(one, 0.0, (rows, keep))
  return total / jnp.maximum(num_rows * V, 1)


@functools.partial(jax.jit, static_argnames=('first_unseen', 'steps', 'rows_per_step',
                                             'cols_per_step'))
def fit_unseen(words_VxD: jax.Array, initial_VxD: jax.Array, key: jax.Array, *,
               first_unseen: int, steps: int = 2000, rows_per_step: int = 256,
               cols_per_step: int = 2048, learning_rate: float = 0.1,
               adagrad_init: float = 0.1) -> jax.Array:
  """Snaps the unseen rows [first_unseen, V) into place (eq. (4)); the others are returned as is."""
  V, _ = words_VxD.shape
  if first_unseen >= V:
    return words_VxD
  acc_V = jnp.full((V,), adagrad_init, jnp.float32)

  def step(i, carry):
    words, acc = carry
    key_r, key_c = jax.random.split(jax.random.fold_in(key, i))
    rows_R = jax.random.randint(key_r, (rows_per_step,), first_unseen, V)
    cols_C = jax.random.randint(key_c, (cols_per_step,), 0, V)
    v_CxD = words[cols_C]  # the others' current values: each row fits its own eq. (4)
    grad_RxD = jax.grad(lambda v: jnp.sum(correlation_loss(
        v, v_CxD, initial_VxD[rows_R], initial_VxD[cols_C])))(words[rows_R])
    # Scaled to a per-column mean, so the step does not depend on cols_per_step.
    return row_optim.update_rows(words, acc, rows_R, grad_RxD / cols_per_step,
                                 learning_rate=learning_rate, optimizer='adagrad',
                                 max_norm=jnp.inf, dense=False)

  words, _ = jax.lax.fori_loop(0, steps, step, (words_VxD, acc_V))
  return words

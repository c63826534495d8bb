"""Negative label samplers. Each returns label ids with static shapes.

Positives come sorted ascending and padded with the sentinel `num_labels`, so
a fixed P serves images with any number of labels.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def uniform_draws(key: jax.Array, num_pos_B: jax.Array, num_labels: int,
                  num_draws: int) -> jax.Array:
  """u ~ U{0, …, Y−|P|−1}, K per pair: the index of a draw among the non-positives."""
  maxval_Bx1 = (num_labels - num_pos_B)[:, None]
  return jax.random.randint(key, (num_pos_B.shape[0], num_draws), 0, maxval_Bx1, jnp.int32)


def skip_positives(u_BxK: jax.Array, pos_BxP: jax.Array) -> jax.Array:
  """Maps u to the u-th label that is not a positive: walking the sorted
  positives, every positive ≤ the running label shifts it up by one. Exact,
  O(K·P), never touches a Y-sized array."""

  def skip_positive(j, label_BxK):
    return label_BxK + (pos_BxP[:, j][:, None] <= label_BxK).astype(jnp.int32)

  return jax.lax.fori_loop(0, pos_BxP.shape[1], skip_positive, u_BxK)


def uniform_negatives(key: jax.Array, pos_BxP: jax.Array, num_pos_B: jax.Array,
                      num_labels: int, num_draws: int) -> jax.Array:
  """K i.i.d. uniform draws from {1..Y} minus the image's positives (Alg. 1 l. 7)."""
  return skip_positives(uniform_draws(key, num_pos_B, num_labels, num_draws), pos_BxP)

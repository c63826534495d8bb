"""Negative label samplers. Each returns label ids with static shapes.

Positives come sorted ascending and padded with the sentinel `num_labels`, so
a fixed P serves images with any number of labels.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def uniform_negatives(key: jax.Array, pos_BxP: jax.Array, num_pos_B: jax.Array,
                      num_labels: int, num_draws: int) -> jax.Array:
  """K i.i.d. uniform draws from {1..Y} minus the image's positives (Alg. 1 l. 7).

  Draws u ~ U{0, …, Y−|P|−1} and maps it to the u-th label that is not a
  positive: walking the sorted positives, every positive ≤ the running label
  shifts it up by one. Exact, O(K·P), never touches a Y-sized array.
  """
  batch = pos_BxP.shape[0]
  maxval_Bx1 = (num_labels - num_pos_B)[:, None]
  label_BxK = jax.random.randint(key, (batch, num_draws), 0, maxval_Bx1, jnp.int32)

  def skip_positive(j, label_BxK):
    return label_BxK + (pos_BxP[:, j][:, None] <= label_BxK).astype(jnp.int32)

  return jax.lax.fori_loop(0, pos_BxP.shape[1], skip_positive, label_BxK)

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


def is_positive(labels_BxK: jax.Array, pos_BxP: jax.Array) -> jax.Array:
  """Whether each draw is one of the image's positives (to be rejected). O(K·P)."""
  return jnp.any(labels_BxK[:, :, None] == pos_BxP[:, None, :], axis=2)


# Paper 004 §2.2 and §3.3: tags for the sampled skip-gram objective.

def sample_tags(key: jax.Array, pos_BxT: jax.Array, num_pos_B: jax.Array,
                num_samples: int) -> jax.Array:
  """`num_samples` of each image's tags, uniformly with replacement: a fixed
  shape for images with any number (≥ 1) of tags (paper 004 §2.2)."""
  u_BxP = jax.random.uniform(key, (pos_BxT.shape[0], num_samples))
  j_BxP = jnp.minimum((u_BxP * num_pos_B[:, None]).astype(jnp.int32), num_pos_B[:, None] - 1)
  return jnp.take_along_axis(pos_BxT, j_BxP, axis=1)


def tag_cdf(tag_counts_Y, power: float = 1.0) -> jax.Array:
  """The cumulative tag distribution ∝ count^power (1: the corpus frequencies,
  as paper 004; 0.75: word2vec's smoothing; 0: uniform over seen tags)."""
  counts_Y = jnp.asarray(tag_counts_Y, jnp.float32)
  weights_Y = jnp.where(counts_Y > 0, counts_Y ** power, 0.0)
  return jnp.cumsum(weights_Y) / jnp.sum(weights_Y)


def frequency_draws(key: jax.Array, cdf_Y: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  """Tags drawn from the tag distribution by inverse CDF: O(log Y) per draw."""
  u = jax.random.uniform(key, shape)
  return jnp.minimum(jnp.searchsorted(cdf_Y, u, side='right'), cdf_Y.shape[0] - 1).astype(jnp.int32)


def adjacent_draws(key: jax.Array, pos_BxT: jax.Array, num_pos_B: jax.Array,
                   num_samples: int) -> jax.Array:
  """Negatives from the tags of the next image in the batch (paper 004 §3.3):
  batches are shuffled, so they follow the tag distribution at no cost."""
  return sample_tags(key, jnp.roll(pos_BxT, -1, axis=0), jnp.roll(num_pos_B, -1), num_samples)

"""Negative label samplers. Each returns label ids with static shapes.

Positives come sorted ascending and padded with the sentinel `num_labels`, so
a fixed P serves images with any number of labels.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import lane_sums


def random_words(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  """Random uint32 words from a raw key (uint32[2]): XLA's counter-based
  ThreeFry bit generator, its 128-bit state the key's two words and their
  complement. jax.random computes ThreeFry with a rolled loop on the CPU and
  `randint` takes two words an integer, several times the cost of this
  (docs/DESIGN.md §1). The algorithm is named rather than
  left to the backend's default, so every backend runs the same generator."""
  key = key.astype(jnp.uint32)
  state = jnp.concatenate([key, ~key])
  return jax.lax.rng_bit_generator(state, shape, jnp.uint32,
                                   algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY)[1]


def below(words: jax.Array, span: jax.Array) -> jax.Array:
  """⌊words·span / 2³²⌋ ∈ [0, span): a uniform word to a uniform integer below
  `span` (Lemire's multiply-high; each integer has ⌊2³²/span⌋ or ⌈2³²/span⌉
  words, a relative bias below span/2³², 2.3e-5 at 100k labels). The 64-bit
  product is built from 16-bit halves: JAX runs without 64-bit integers."""
  span = jnp.asarray(span).astype(jnp.uint32)
  w_hi, w_lo = words >> 16, words & 0xFFFF
  s_hi, s_lo = span >> 16, span & 0xFFFF
  low = w_lo * s_lo
  mid = w_hi * s_lo + (low >> 16)
  mid2 = w_lo * s_hi + (mid & 0xFFFF)
  return (w_hi * s_hi + (mid >> 16) + (mid2 >> 16)).astype(jnp.int32)


def unit_floats(words: jax.Array) -> jax.Array:
  """Uniform float32 in [0, 1) from uint32 words: their top 23 bits as a mantissa."""
  one_to_two = jax.lax.bitcast_convert_type((words >> 9) | jnp.uint32(0x3F800000), jnp.float32)
  return one_to_two - 1.0


def uniform_draws(key: jax.Array, num_pos_B: jax.Array, num_labels: int,
                  num_draws: int) -> jax.Array:
  """u ~ U{0, …, Y−|P|−1}, K per pair: the index of a draw among the non-positives."""
  words_BxK = random_words(key, (num_pos_B.shape[0], num_draws))
  return below(words_BxK, (num_labels - num_pos_B)[:, None])


def skip_positives(u_BxK: jax.Array, pos_BxP: jax.Array, num_labels: int) -> jax.Array:
  """Maps u to the u-th label that is not a positive. With the positives
  sorted, p_j − j labels below p_j are not positives, so p_j lies below the
  u-th one iff p_j − j ≤ u: the label is u + #{j : p_j − j ≤ u}. Exact,
  O(K·P) compares counted over P (in slices on the CPU, as `is_positive`),
  never a Y-sized array."""
  j_P = jnp.arange(pos_BxP.shape[1], dtype=pos_BxP.dtype)
  below_BxP = jnp.where(pos_BxP < num_labels, pos_BxP - j_P, num_labels)  # padding: above every u
  return u_BxK + lane_sums.sum_along(
      lambda p0, p1: (below_BxP[:, None, p0:p1] <= u_BxK[:, :, None]).astype(u_BxK.dtype),
      pos_BxP.shape[1], axis=2, width=1)


def uniform_negatives(key: jax.Array, pos_BxP: jax.Array, num_pos_B: jax.Array,
                      num_labels: int, num_draws: int) -> jax.Array:
  """K i.i.d. uniform draws from {1..Y} minus the image's positives (Alg. 1 l. 7)."""
  return skip_positives(uniform_draws(key, num_pos_B, num_labels, num_draws), pos_BxP,
                        num_labels)


def is_positive(labels_BxK: jax.Array, pos_BxP: jax.Array) -> jax.Array:
  """Whether each draw is one of the image's positives (to be rejected). O(K·P),
  the matches counted over P in slices on the CPU (core/lane_sums.py)."""
  return lane_sums.sum_along(
      lambda p0, p1: (labels_BxK[:, :, None] == pos_BxP[:, None, p0:p1]).astype(jnp.int32),
      pos_BxP.shape[1], axis=2, width=1) > 0


# Paper 004 §2.2 and §3.3: tags for the sampled skip-gram objective.

def sample_tags(key: jax.Array, pos_BxT: jax.Array, num_pos_B: jax.Array,
                num_samples: int) -> jax.Array:
  """`num_samples` (P) of each image's tags, uniformly: without replacement when
  the image has at least P tags, with replacement when it has fewer ("we sample
  with replacement to reach our threshold", paper 004 §2.2). A fixed shape for
  images with any number (≥ 1) of tags."""
  key_with, key_without = jax.random.split(key)
  B, T = pos_BxT.shape
  u_BxP = jax.random.uniform(key_with, (B, num_samples))
  j_BxP = jnp.minimum((u_BxP * num_pos_B[:, None]).astype(jnp.int32), num_pos_B[:, None] - 1)
  if T >= num_samples:  # else no image has P tags
    # The P tags with the smallest of i.i.d. uniform keys: a uniform P-subset.
    keys_BxT = jax.random.uniform(key_without, (B, T))
    keys_BxT = jnp.where(jnp.arange(T)[None, :] < num_pos_B[:, None], keys_BxT, 2.0)
    subset_BxP = jax.lax.top_k(-keys_BxT, num_samples)[1].astype(jnp.int32)
    j_BxP = jnp.where((num_pos_B >= num_samples)[:, None], subset_BxP, j_BxP)
  return jnp.take_along_axis(pos_BxT, j_BxP, axis=1)


class AliasTable(NamedTuple):
  """Walker's alias method for a fixed distribution over Y tags: draw a slot
  uniformly, keep it with probability prob_Y[slot], else take alias_Y[slot].
  O(1) per draw: two gathers, no search. (An inverse-CDF search is a loop of
  log Y dependent steps, a while loop on a GPU: it cost more than the rest of
  paper 004's sampled step there.)"""
  prob_Y: jax.Array   # float32, the chance a slot keeps its own tag
  alias_Y: jax.Array  # int32, the tag a slot gives otherwise

  def probabilities(self) -> np.ndarray:
    """The distribution the table draws from (float64), for checks."""
    prob, alias = np.asarray(self.prob_Y, np.float64), np.asarray(self.alias_Y)
    Y = len(prob)
    return (prob + np.bincount(alias, weights=1.0 - prob, minlength=Y)) / Y


def tag_distribution(tag_counts_Y, power: float = 1.0) -> AliasTable:
  """The tag distribution ∝ count^power (1: the corpus frequencies, as paper
  004; 0.75: word2vec's smoothing; 0: uniform over seen tags), as an alias
  table (Vose's construction, O(Y), on the host once)."""
  counts_Y = np.asarray(tag_counts_Y, np.float64)
  weights_Y = np.where(counts_Y > 0, counts_Y ** power, 0.0)
  if weights_Y.sum() <= 0:
    raise ValueError('the tag distribution needs at least one tag with a positive count')
  Y = len(weights_Y)
  scaled = weights_Y * Y / weights_Y.sum()
  prob, alias = np.ones(Y), np.arange(Y)
  small = [i for i in range(Y) if scaled[i] < 1.0]
  large = [i for i in range(Y) if scaled[i] >= 1.0]
  while small and large:
    s, l = small.pop(), large.pop()
    prob[s], alias[s] = scaled[s], l
    scaled[l] -= 1.0 - scaled[s]
    (small if scaled[l] < 1.0 else large).append(l)
  for i in small:  # only float round-off leaves a slot here: it keeps its own tag
    prob[i] = 1.0 if weights_Y[i] > 0 else 0.0
    if weights_Y[i] == 0:
      alias[i] = int(np.argmax(weights_Y))
  return AliasTable(jnp.asarray(prob, jnp.float32), jnp.asarray(alias, jnp.int32))


def frequency_draws(key: jax.Array, table: AliasTable, shape: tuple[int, ...]) -> jax.Array:
  """Tags drawn from the tag distribution (`tag_distribution`): O(1) per draw."""
  key_slot, key_keep = jax.random.split(key)
  Y = table.prob_Y.shape[0]
  slot = jax.random.randint(key_slot, shape, 0, Y, jnp.int32)
  keep = jax.random.uniform(key_keep, shape) < table.prob_Y[slot]
  return jnp.where(keep, slot, table.alias_Y[slot])


def adjacent_draws(key: jax.Array, pos_BxT: jax.Array, num_pos_B: jax.Array,
                   num_samples: int) -> jax.Array:
  """Negatives from the tags of the next image in the batch (paper 004 §3.3):
  batches are shuffled, so they follow the tag distribution at no cost."""
  return sample_tags(key, jnp.roll(pos_BxT, -1, axis=0), jnp.roll(num_pos_B, -1), num_samples)

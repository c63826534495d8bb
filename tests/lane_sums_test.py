"""core/lane_sums.py: a sum made in slices is the one reduction's sum."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import lane_sums


@pytest.mark.parametrize('axis,size,width', [
    (2, 77, 32),    # two whole slices and one padded
    (2, 32, 32),    # one slice
    (1, 21, 1),     # one a pair, as the exact rank's slopes
    (2, 5, 32),     # narrower than a slice
    (2, 2100, 32),  # more than MAX_SLICES slices of 32: cut wider
])
def test_a_sum_in_slices_is_the_whole_sum(axis, size, width):
  rng = np.random.default_rng(size)
  shape = [3, 4, 5]
  shape[axis] = size
  term_full = rng.integers(-50, 50, shape).astype(np.int32)  # integers: any order adds alike
  sliced = []

  def term_of(j0, j1):
    sliced.append(j1 - j0)
    return jnp.asarray(term_full).take(jnp.arange(j0, j1), axis=axis)

  got = jax.jit(lambda: lane_sums.sum_along(term_of, size, axis, width))()
  np.testing.assert_array_equal(got, term_full.sum(axis))
  # Both forms were traced: the one reduction's whole term, and the CPU's
  # slices, at most MAX_SLICES of them, covering the axis once.
  sliced.remove(size)
  assert sum(sliced) == size and len(sliced) <= lane_sums.MAX_SLICES
  assert len(sliced) == -(-size // width) or size > width * lane_sums.MAX_SLICES


def test_turned_off_makes_the_one_reduction_alone():
  """The profile's A/B arm: under turned_off() only the whole term is made."""
  made = []

  def term_of(j0, j1):
    made.append((j0, j1))
    return jnp.arange(j0, j1)[None, :] * jnp.ones((2, 1), jnp.int32)

  with lane_sums.turned_off():
    got = jax.jit(lambda: lane_sums.sum_along(term_of, 70, axis=1, width=32))()
  np.testing.assert_array_equal(got, [sum(range(70))] * 2)
  assert set(made) == {(0, 70)}  # no slice

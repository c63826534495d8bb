"""Σ along one axis of a term made on the fly, as adds of its slices on the CPU.

XLA:CPU emits a reduction fused with its producer as a scalar loop over the
reduced axis, where an elementwise fusion runs vectorised. The exact rank's
two sums over a B×Q×Y comparison (table_reads.exact_label_grads), the
draws' matches against the positives (samplers) and evaluation's ranks
(metrics) pay that: with them made in
slices Delicious' exact-rank step takes 7.5 ms against 21.5 as one reduction
each, debtags' drawn step 3.6 against 5.0 ms (2-core CPU; `launch/benchmark.py
--suite=profile` times the two in one process: step_profile.slices_vs_reduction).
Here the slices are added elementwise into an accumulator `width` wide, then
that is reduced. Other platforms keep the one reduction (theirs are
vectorised; not measured here): the form follows the platform the program is
compiled for (lax.platform_dependent).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from wsabie_jax.core import ab_switch

MAX_SLICES = 64  # slices a sum is cut into at most (each is traced and compiled)
_switch = ab_switch.Switch()
turned_off = _switch.turned_off  # the one reduction on the CPU too (the profile's A/B)


def sum_along(term_of: Callable[[int, int], jax.Array], size: int, axis: int,
              width: int) -> jax.Array:
  """Σ along `axis` (of length `size`) of the term whose slice [j0:j1] along
  that axis term_of(j0, j1) makes, that axis removed. On the CPU the slices
  are `width` wide (wider where more than MAX_SLICES would be needed)."""
  if size == 0:
    return jnp.sum(term_of(0, 0), axis)
  width = min(size, width * -(-size // (width * MAX_SLICES)))

  def by_slices():
    total = None
    for j0 in range(0, size, width):
      part = term_of(j0, min(size, j0 + width))
      if part.shape[axis] < width:  # the last slice, padded with zeros
        pad = [(0, 0)] * part.ndim
        pad[axis] = (0, width - part.shape[axis])
        part = jnp.pad(part, pad)
      total = part if total is None else total + part
    return jnp.sum(total, axis)

  one_reduction = lambda: jnp.sum(term_of(0, size), axis)
  return jax.lax.platform_dependent(cpu=one_reduction if _switch.off else by_slices,
                                    default=one_reduction)

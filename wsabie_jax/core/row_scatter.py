"""out[at_n] += scale_n · src[take_n] for n < N: the step's two big row
scatters (an image's embedding Σ x_f·V_f, eq. (1); the feature table's
update by its pieces) without an N×D buffer that leaves the cache.

XLA:CPU writes a gather's N×D rows to memory before a scatter-add reads them
back; at the stand-ins' N (41–65k non-zeros at D 128: 21–33 MB) that
round trip costs more than the arithmetic. On the CPU the op runs as one
C++ kernel where it can be built (core/native_rows.py: no buffer at all;
the stand-ins' steps take 0.73–0.95 of their time with the chunks), else in
chunks of at most CHUNK_FLOATS gathered floats (a lax.scan), each chunk
staying in cache between the two. On other platforms the one-op form is kept
(their gathers and scatters fuse).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from wsabie_jax.core import native_rows

# 8 MiB of gathered rows a chunk. `standin:small_text`'s forward (64,720
# non-zeros, D 128) in 4 chunks: 2.70 → 1.13 ms; `standin:text`'s (41,152) in
# 3: 1.15 → 0.77 ms (fastest of 20 interleaved calls each). The feature
# table's update by its pieces (row_optim.update_factored) in chunks against
# one op: small_text's step 12.9 → 8.7 ms from a fresh model (fastest of 12
# interleaved rounds), its training loop 174k → 233k pairs/s.
CHUNK_FLOATS = 1 << 21


def add_scaled_rows(out_MxD: jax.Array, at_N: jax.Array, scale_N: jax.Array, src_SxD: jax.Array,
                    take_N: jax.Array, at_sorted: bool = False, threads: int = 1) -> jax.Array:
  """out_MxD with scale_n·src_SxD[take_n] added at row at_n, every n (a
  repeated row gets each of its adds); `at_sorted`: at_N is non-decreasing;
  `threads`: the CPU kernel's threads where at_N is sorted (a call that has
  the cores to itself, as the linear members' products; the step's own
  scatters keep one, beside XLA's threads).

  The form follows the platform the call is compiled for, not the process's
  default backend: a run put on the host's CPU (`train.platform='cpu'`) on a
  machine with an accelerator still takes the CPU kernel, and a program
  lowered for an accelerator never holds it."""
  def one_op(out_MxD, at_N, scale_N, src_SxD, take_N):
    return out_MxD.at[at_N].add(scale_N[:, None] * src_SxD[take_N], indices_are_sorted=at_sorted)

  def on_cpu(*operands):
    if native_rows.fits(*operands) and native_rows.available():
      return native_rows.add_scaled_rows(*operands, threads=threads if at_sorted else 1)
    return _chunked(one_op, *operands)

  return jax.lax.platform_dependent(out_MxD, at_N, scale_N, src_SxD, take_N,
                                    cpu=on_cpu, default=one_op)


def _chunked(one_op, out_MxD, at_N, scale_N, src_SxD, take_N):
  """`one_op` in a lax.scan over chunks of at most CHUNK_FLOATS gathered floats."""
  N, D = at_N.shape[0], out_MxD.shape[1]
  chunks = -(-N * D // CHUNK_FLOATS)
  if chunks <= 1:
    return one_op(out_MxD, at_N, scale_N, src_SxD, take_N)
  size = -(-N // chunks)
  pad = chunks * size - N  # scale 0 at the last row: adds nothing, keeps at_N sorted
  at_CxS, take_CxS = (jnp.pad(x, (0, pad), mode='edge').reshape(chunks, size)
                      for x in (at_N, take_N))
  scale_CxS = jnp.pad(scale_N, (0, pad)).reshape(chunks, size)

  def add(out, chunk):
    at_S, scale_S, take_S = chunk
    return one_op(out, at_S, scale_S, src_SxD, take_S), None

  return jax.lax.scan(add, out_MxD, (at_CxS, scale_CxS, take_CxS))[0]

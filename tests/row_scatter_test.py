"""core/row_scatter.py: the chunked scatter of scaled rows equals numpy's
unbuffered add (np.add.at), whatever the chunking."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import row_scatter


@pytest.mark.parametrize('at_sorted', [True, False])
@pytest.mark.parametrize('chunk_floats', [6 * 7, 6 * 64, 6 * 10_000])
def test_chunked_scatter_is_the_one_op_add(monkeypatch, chunk_floats, at_sorted):
  """7 rows a chunk (many chunks, the last one padded with scale 0 at the
  last row), 64, and one chunk; rows repeat; the output starts non-zero."""
  rng = np.random.default_rng(1)
  N, M, S, D = 203, 16, 50, 6
  at_N = rng.integers(0, M, N)
  at_N = np.sort(at_N) if at_sorted else at_N
  take_N, scale_N = rng.integers(0, S, N), rng.standard_normal(N).astype(np.float32)
  src_SxD, out_MxD = (rng.standard_normal(shape).astype(np.float32) for shape in ((S, D), (M, D)))
  want = out_MxD.astype(np.float64)
  np.add.at(want, at_N, scale_N[:, None].astype(np.float64) * src_SxD[take_N])
  monkeypatch.setattr(row_scatter, 'CHUNK_FLOATS', chunk_floats)
  got = jax.jit(lambda *a: row_scatter.add_scaled_rows(*a, at_sorted=at_sorted))(  # (a new trace)
      jnp.asarray(out_MxD), jnp.asarray(at_N, jnp.int32), jnp.asarray(scale_N),
      jnp.asarray(src_SxD), jnp.asarray(take_N, jnp.int32))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)

"""core/row_scatter.py: the scatter of scaled rows, XLA's chunked form and
the native CPU kernel (core/native_rows.py), equals numpy's unbuffered add
(np.add.at), whatever the chunking."""
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import native_rows, row_scatter


def _operands(rng, N=203, M=16, S=50, D=6, at_sorted=False):
  at_N = rng.integers(0, M, N)
  at_N = np.sort(at_N) if at_sorted else at_N
  take_N, scale_N = rng.integers(0, S, N), rng.standard_normal(N).astype(np.float32)
  src_SxD, out_MxD = (rng.standard_normal(shape).astype(np.float32) for shape in ((S, D), (M, D)))
  return out_MxD, at_N.astype(np.int32), scale_N, src_SxD, take_N.astype(np.int32)


def _np_add_at(out_MxD, at_N, scale_N, src_SxD, take_N):
  want = out_MxD.astype(np.float64)
  np.add.at(want, at_N, scale_N[:, None].astype(np.float64) * src_SxD[take_N])
  return want


@pytest.mark.parametrize('at_sorted', [True, False])
@pytest.mark.parametrize('chunk_floats', [6 * 7, 6 * 64, 6 * 10_000])
def test_chunked_scatter_is_the_one_op_add(monkeypatch, chunk_floats, at_sorted):
  """XLA's form (the native kernel off): 7 rows a chunk (many chunks, the
  last one padded with scale 0 at the last row), 64, and one chunk; rows
  repeat; the output starts non-zero."""
  operands = _operands(np.random.default_rng(1), at_sorted=at_sorted)
  monkeypatch.setattr(row_scatter, 'CHUNK_FLOATS', chunk_floats)
  xla = jax.jit(lambda *a: row_scatter.add_scaled_rows(*a, at_sorted=at_sorted))  # (a new trace)
  with native_rows.turned_off():
    assert native_rows.TARGET not in xla.lower(*map(jnp.asarray, operands)).as_text()
    got = xla(*map(jnp.asarray, operands))
  np.testing.assert_allclose(np.asarray(got), _np_add_at(*operands), rtol=1e-5, atol=1e-5)


@pytest.fixture
def on_cpu():
  """The kernel is a CPU one (an FFI target registered for the host): on a
  machine with an accelerator its tests put their arrays on the CPU."""
  with jax.default_device(jax.devices('cpu')[0]):
    yield


def needs_native(test):
  return pytest.mark.skipif(not native_rows.enabled(),
                            reason='WSABIE_JAX_NATIVE=0 turns the native kernel off')(
      pytest.mark.usefixtures('on_cpu')(test))


@needs_native
def test_native_kernel_is_built_where_there_is_a_compiler():
  """Where the machine has a C++ compiler the kernel builds and loads: a
  failed build would only log a warning and leave the step slower."""
  if not (shutil.which('g++') or shutil.which('c++')):
    pytest.skip('no C++ compiler')
  assert native_rows.available()


@needs_native
@pytest.mark.parametrize('D', [6, 128, 130])
def test_native_kernel_is_numpys_add(D):
  """Rows repeat, scales include zeros, D odd-sized for the vector loop; the
  step's operand shapes' order (S > M and S < M)."""
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  rng = np.random.default_rng(D)
  for N, M, S in ((1000, 16, 50), (300, 70, 9)):
    operands = _operands(rng, N, M, S, D)
    operands[2][::7] = 0
    got = jax.jit(native_rows.add_scaled_rows)(*map(jnp.asarray, operands))
    np.testing.assert_allclose(np.asarray(got), _np_add_at(*operands), rtol=1e-5, atol=1e-5)
    lowered = jax.jit(row_scatter.add_scaled_rows).lower(*map(jnp.asarray, operands))
    assert native_rows.TARGET in lowered.as_text()  # row_scatter takes it on the CPU


@needs_native
@pytest.mark.parametrize('threads', [2, 3, 7, 64])
def test_native_kernel_on_threads_adds_each_row_as_one_thread(threads):
  """Sorted rows cut into runs, one a thread: the same sums, bit for bit, as
  one thread (each row's adds in the same order), rows repeated across every
  cut (3 rows for 7 and 64 threads: most runs start past the end)."""
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  rng = np.random.default_rng(threads)
  for N, M in ((1000, 16), (500, 3)):
    operands = tuple(map(jnp.asarray, _operands(rng, N, M, 50, 6, at_sorted=True)))
    one = native_rows.add_scaled_rows(*operands)
    got = native_rows.add_scaled_rows(*operands, threads=threads)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(one))
    np.testing.assert_allclose(np.asarray(got), _np_add_at(*map(np.asarray, operands)),
                               rtol=1e-5, atol=1e-5)
    via = jax.jit(lambda *a: row_scatter.add_scaled_rows(*a, at_sorted=True, threads=threads))
    np.testing.assert_array_equal(np.asarray(via(*operands)), np.asarray(one))


@needs_native
def test_native_kernel_skips_rows_out_of_range():
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  out_MxD, at_N, scale_N, src_SxD, take_N = _operands(np.random.default_rng(3), 40, 5, 7, 4)
  at_N[:3], take_N[3:6] = [-1, 5, 99], [-2, 7, 1000]
  got = native_rows.add_scaled_rows(*map(jnp.asarray, (out_MxD, at_N, scale_N, src_SxD, take_N)))
  kept = np.arange(40) >= 6
  want = _np_add_at(out_MxD, at_N[kept], scale_N[kept], src_SxD, take_N[kept])
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@needs_native
def test_native_kernel_updates_a_donated_table_in_place():
  """A table handed over (donated) is added into where it lies: no M×D copy
  a step, whatever the table's size (docs/DESIGN.md §1)."""
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  operands = [jnp.asarray(x) for x in _operands(np.random.default_rng(4), M=4096, D=64)]
  for add in (native_rows.add_scaled_rows, row_scatter.add_scaled_rows):
    hlo = jax.jit(add, donate_argnums=0).lower(*operands).compile().as_text()
    assert 'wsabie_add_scaled_rows' in hlo and 'conditional' not in hlo
    assert not re.search(r'f32\[4096,64\]\{1,0\} copy\(', hlo), hlo


@needs_native
def test_the_form_follows_the_platform_compiled_for():
  """Where the kernel is built, a program lowered for the CPU holds it and
  one lowered for an accelerator (on this machine or any) never does, however
  the process's default backend reads."""
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype)
            for x in _operands(np.random.default_rng(5), D=8)]
  custom_call = [jax.export.DisabledSafetyCheck.custom_call(native_rows.TARGET)]
  for platform, holds in (('cpu', True), ('cuda', False), ('tpu', False)):
    exported = jax.export.export(jax.jit(row_scatter.add_scaled_rows), platforms=[platform],
                                 disabled_checks=custom_call)(*shapes)
    assert (native_rows.TARGET in exported.mlir_module()) == holds, platform


def test_no_compiler_leaves_xla_with_a_warning(monkeypatch, tmp_path, caplog):
  """A build that cannot run is not an error: the kernel is reported unused,
  naming why, and the scatters stay XLA's (the test above)."""
  monkeypatch.setenv('CXX', str(tmp_path / 'no-such-compiler'))
  monkeypatch.setenv('WSABIE_JAX_CACHE', str(tmp_path))
  with caplog.at_level('WARNING', logger='wsabie_jax'):
    assert native_rows._loaded.__wrapped__() is False  # (uncached: this process's kernel stays)
  assert 'no-such-compiler' in caplog.text and 'not used' in caplog.text
  assert not list(tmp_path.glob('native/*.so'))

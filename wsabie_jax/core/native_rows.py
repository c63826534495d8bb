"""out[at_n] += scale_n · src[take_n] on the CPU by a C++ kernel through
JAX's FFI (native_rows.cc), for core/row_scatter.py.

XLA:CPU writes a gather's rows to memory and reads them back in the
scatter-add, element by element; the kernel reads each source row once and
adds it into its output row in one pass, prefetching the rows a few entries
ahead. With its two such ops a step (64,656 non-zeros, D 128) run by the
kernel, `standin:small_text`'s step takes 0.73–0.75 of its time with XLA's
chunked form (`python launch/benchmark.py --suite=profile
--panel=standin:small_text`, docs/RESULTS.md).

The kernel is compiled on first use with the machine's C++ compiler ($CXX,
else g++ or c++) against jaxlib's FFI headers, for this CPU (-march=native),
into the user's cache ($WSABIE_JAX_CACHE/native, else
~/.cache/wsabie_jax/native), under a name that changes with the source, the
jax version, the compiler and the CPU: one build per machine, a few seconds.
Where there is no compiler or the build fails, `available()` is False, the
reason is logged once, and row_scatter keeps XLA's chunked form (the same
sums). WSABIE_JAX_NATIVE=0 turns the kernel off.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import ab_switch, user_cache

log = logging.getLogger('wsabie_jax')

SOURCE = pathlib.Path(__file__).with_suffix('.cc')
TARGET = 'wsabie_add_scaled_rows'
BUILD_SECONDS = 300  # a build that takes longer is abandoned (the XLA form is used)
_switch = ab_switch.Switch()
turned_off = _switch.turned_off  # XLA's form for the ops traced inside (the profile's A/B, tests)


def enabled() -> bool:
  """Whether ops traced now may take the kernel (WSABIE_JAX_NATIVE, `turned_off`)."""
  return not _switch.off and os.environ.get('WSABIE_JAX_NATIVE', '1') != '0'


def available() -> bool:
  """Whether the kernel is enabled, built and registered with JAX (built on the first call)."""
  return enabled() and _loaded()


@functools.lru_cache(maxsize=None)
def _loaded() -> bool:
  try:
    library = ctypes.cdll.LoadLibrary(str(_built()))
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(library.WsabieAddScaledRows),
                                platform='cpu')
    return True
  except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as e:
    log.warning('wsabie_jax: the native row kernel is not used (%s); XLA runs the row '
                'scatters instead, slower on the CPU', e)
    return False


def fits(out_MxD: jax.Array, at_N: jax.Array, scale_N: jax.Array, src_SxD: jax.Array,
         take_N: jax.Array) -> bool:
  """Whether the kernel takes these operands (float32 rows, int32 indices)."""
  return (all(x.dtype == jnp.float32 for x in (out_MxD, scale_N, src_SxD))
          and all(x.dtype == jnp.int32 for x in (at_N, take_N))
          and out_MxD.ndim == src_SxD.ndim == 2 and out_MxD.shape[1] == src_SxD.shape[1])


def add_scaled_rows(out_MxD: jax.Array, at_N: jax.Array, scale_N: jax.Array, src_SxD: jax.Array,
                    take_N: jax.Array, threads: int = 1) -> jax.Array:
  """out_MxD with scale_n·src_SxD[take_n] added at row at_n, every n, in place
  where out_MxD's buffer can be reused (a donated table). Needs `available()`.
  `threads` > 1 only where at_N is sorted: runs of whole output rows, one a thread."""
  return jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(out_MxD.shape, out_MxD.dtype),
                          input_output_aliases={0: 0})(out_MxD, at_N, scale_N, src_SxD, take_N,
                                                       threads=np.int64(threads))


def _built() -> pathlib.Path:
  """The kernel's shared library, compiled if this machine has none yet."""
  compiler = os.environ.get('CXX') or shutil.which('g++') or shutil.which('c++')
  if not compiler:
    raise OSError('no C++ compiler found ($CXX, g++ or c++)')
  version = subprocess.run([compiler, '--version'], capture_output=True, text=True,
                           timeout=60).stdout
  source = SOURCE.read_bytes()
  key = hashlib.sha256(b'\0'.join(
      s if isinstance(s, bytes) else s.encode()
      for s in (source, jax.__version__, version, platform.machine(), _cpu()))).hexdigest()[:16]
  library = user_cache.root() / 'native' / f'native_rows-{key}.so'
  if library.exists():
    return library
  library.parent.mkdir(parents=True, exist_ok=True)
  # Built beside its final name and moved there: processes building at once
  # (test workers) each write their own file, and the last move wins.
  with tempfile.TemporaryDirectory(dir=library.parent) as tmp:
    out = pathlib.Path(tmp) / library.name
    for cpu_flags in (['-march=native'], []):  # (a compiler without -march=native: the generic ISA)
      command = [compiler, '-O3', *cpu_flags, '-std=c++17', '-shared', '-fPIC', '-pthread', '-w',
                 '-I', jax.ffi.include_dir(), str(SOURCE), '-o', str(out)]
      done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_SECONDS)
      if not done.returncode:
        break
    else:
      raise OSError(f'{" ".join(command)} failed: {done.stderr.strip()[-2000:]}')
    os.replace(out, library)
  log.info('wsabie_jax: built the native row kernel %s', library)
  return library


def _cpu() -> str:
  """The CPU's model and instruction sets (-march=native builds for them)."""
  try:
    lines = pathlib.Path('/proc/cpuinfo').read_text().splitlines()
  except OSError:
    return platform.processor()
  return '\n'.join(sorted({l for l in lines if l.startswith(('model name', 'flags', 'Features'))}))

"""Matmul precision: full float32 wherever a score decides a rank.

Accelerators run float32 matmuls in reduced precision by default (TF32 on
NVIDIA GPUs since Ampere, bf16 passes on TPUs): about 3 decimal digits, enough
to reorder near-tied labels, flip a violator test against the margin or make
a k-means iteration worse. Evaluation, metrics, k-NN, k-means and the scores
of the samplers are traced under `full_float32`; the training step under the
precision its config names (wsabie/settings.py `matmul_precision`).
"""
from __future__ import annotations

import contextlib
import functools

import jax

PRECISIONS = ('float32', 'tensorfloat32', 'bfloat16', 'default')


def full_float32(fn):
  """`fn` traced with float32 matmuls (put it under jax.jit, above the function)."""
  return with_precision('float32')(fn)


def with_precision(precision: str):
  """A decorator tracing the function under `jax.default_matmul_precision(precision)`
  ('default': the backend's own choice)."""
  if precision not in PRECISIONS:
    raise ValueError(f'matmul precision {precision!r} is not one of {PRECISIONS}')

  def decorate(fn):
    if precision == 'default':
      return fn

    @functools.wraps(fn)
    def traced(*args, **kwargs):
      with scope(precision):
        return fn(*args, **kwargs)

    return traced

  return decorate


def scope(precision: str):
  """A context for tracing under `precision` ('default': no change)."""
  if precision not in PRECISIONS:
    raise ValueError(f'matmul precision {precision!r} is not one of {PRECISIONS}')
  return contextlib.nullcontext() if precision == 'default' else \
      jax.default_matmul_precision(precision)

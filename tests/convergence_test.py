"""Time to 95% of the best validation metric, and the speed-ups between runs."""
import math

import pytest

from wsabie_jax.reproduce import convergence


def _history(points):
  return [{'step': 100 * i, 'step_seconds': t, 'p@5': v} for i, (t, v) in enumerate(points, 1)]


def test_time_to_reach_and_speedups():
  histories = {'warp': _history([(1, 0.10), (2, 0.18), (3, 0.19), (4, 0.20)]),
               'fast': _history([(0.5, 0.19), (1.0, 0.21), (1.5, 0.22)]),
               'never': _history([(1, 0.05), (2, 0.06)])}
  out = convergence.compare(histories, 'warp')
  assert out['warp']['time_to_own'] == 3          # 0.19 ≥ 0.95 · 0.20
  assert out['fast']['time_to_own'] == 1.0        # 0.21 ≥ 0.95 · 0.22 = 0.209
  assert out['fast']['time_to_reference'] == 0.5  # 0.19 ≥ 0.95 · 0.20
  assert out['fast']['speedup_own'] == pytest.approx(3.0)
  assert out['fast']['speedup_reference'] == pytest.approx(6.0)
  assert math.isinf(out['never']['time_to_reference']) and out['never']['speedup_reference'] == 0

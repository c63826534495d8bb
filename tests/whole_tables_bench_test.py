"""The `tables` benchmark suite runs and reports what 'auto' picks (figures are
printed by launch/benchmark.py --suite=tables, not asserted)."""
from wsabie_jax.benchmarks import gather_vs_whole
import pytest

pytestmark = pytest.mark.slow  # a benchmark suite run as a smoke test


def test_tables_suite_reports_each_reading():
  (row,) = gather_vs_whole.on_data(['corel5k'], seconds=0.05)
  assert (row['Y'], row['Q'], row['K']) == (374, 5, 100)
  assert row['auto'] == {'labels': True, 'features': False}  # Y 374 ≤ 8·101; B·d > 20·N
  assert all(row[f'ms_{k}'] > 0 for k in ('rows', 'auto', 'both'))
  grid = gather_vs_whole.grid(small=True, seconds=0.05)
  assert len(grid) == 4 and all(r['ms_rows'] > 0 and r['ms_whole'] > 0 for r in grid)
  # labels: Y 50 ≤ 8·11 < Y 100; features: B·d ≥ 64·3000 > 20·(64·100 slots)
  assert [r['auto_whole'] for r in grid] == [True, False, False, False]

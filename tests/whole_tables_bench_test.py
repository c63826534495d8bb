"""The `tables` benchmark suite runs and reports what 'by_size' picks (figures are
printed by launch/benchmark.py --suite=tables, not asserted)."""
from wsabie_jax.benchmarks import gather_vs_whole
from tests.identity_test import _libsvm_set
import pytest

pytestmark = pytest.mark.slow  # a benchmark suite run as a smoke test


def test_tables_suite_reports_each_reading(tmp_path):
  _libsvm_set(tmp_path)  # 300 images, 41 features with the bias, 12 labels
  (row,) = gather_vs_whole.on_data([f'libsvm:{tmp_path}/train.txt:{tmp_path}/test.txt'],
                                   seconds=0.05)
  assert (row['Y'], row['B'], row['K']) == (12, 128, 11)  # B's floor; K = Y − 1 (the exact rank)
  # labels: the exact rank reads Y ≤ label_chunk whole; features: B·d = 128·41 ≤ 20·N slots
  assert row['by_size'] == {'labels': True, 'features': True}
  assert all(row[f'ms_{k}'] > 0 for k in ('rows', 'by_size', 'both'))
  grid = gather_vs_whole.grid(small=True, seconds=0.05)
  assert len(grid) == 4 and all(r['ms_rows'] > 0 and r['ms_whole'] > 0 for r in grid)
  # labels: B 64 · 11 pieces · D 16 gathered floats stay in the caches, so the
  # bound is 8·(10 + 1): Y 50 whole, Y 100 by rows (tables_test has the bounds'
  # edges); features: B·d ≥ 64·3000 > 20·(64·100 slots)
  assert [r['by_size_whole'] for r in grid] == [True, False, False, False]

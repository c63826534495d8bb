"""The `accelerator` benchmark suite takes the tables and the grid's Ys it is
asked for (figures are printed by launch/benchmark.py --suite=accelerator on a
device, not asserted)."""

import jax
import pytest

from wsabie_jax.benchmarks import accelerator


def test_an_unknown_table_is_refused_by_name():
  with pytest.raises(ValueError, match=r"unknown accelerator tables \['grids'\]"):
    accelerator.run(small=True, budget=1.0, tables=('grids',))


def test_the_default_steps_a_call_are_the_platforms():
  """steps_per_call 0: the grid's loop column at the platform's default (16 on a
  CPU, 64 on a GPU: the test runs on either)."""
  platform = jax.devices()[0].platform
  assert accelerator.run(small=True, budget=1.0, tables=())['steps_per_call'] == (
      16 if platform == 'cpu' else 64)


@pytest.mark.slow  # four short trainings
def test_the_shipped_configs_and_batch_sizes_report_what_they_fitted():
  out = accelerator.run(small=True, budget=1.0, tables=('shipped', 'batches'))
  rows = {r['config']: r for r in out['shipped']}
  assert set(rows) == set(accelerator.SMALL_SHIPPED)
  corel = rows['wsabie_corel5k:small']
  assert corel['fitted']['train.steps_per_call'] == 16 and corel['fitted']['train.batch_size'] == 32
  assert all(r['pairs_per_sec'] > 0 and 0 <= r['input_wait_seconds'] <= r['train_seconds'] + 1
             for r in rows.values())
  batches = out['batches']
  assert [r['B'] for r in batches] == [batches[0]['B'], 2 * batches[0]['B']]
  assert all(0 <= r['p@1'] <= 1 for r in batches)

"""The `accelerator` benchmark suite takes the tables and the grid's Ys it is
asked for (figures are printed by launch/benchmark.py --suite=accelerator on a
device, not asserted)."""
import math

import jax
import pytest

from wsabie_jax.benchmarks import accelerator


def test_an_unknown_table_is_refused_by_name():
  with pytest.raises(ValueError, match=r"unknown accelerator tables \['grids'\]"):
    accelerator.run(small=True, budget=1.0, tables=('grids',))


@pytest.mark.slow  # six small trainings
def test_the_grid_takes_only_the_labels_and_shapes_asked():
  rows = accelerator.run(small=True, budget=1.0, steps_per_call=4, tables=('grid',),
                         labels=(500,), shapes=((64, 10), (256, 10)))
  assert set(rows) == {'grid', 'steps_per_call'}  # no corel5k, no LightFM
  grid = rows['grid']
  assert [(r['Y'], r['B'], r['K']) for r in grid] == [(500, 64, 10), (500, 256, 10)]
  other = 'static' if jax.devices()[0].platform == 'cpu' else 'traced'  # than the default
  for r in grid:
    assert all(r[k] > 0 for k in ('alone', 'alone_gathered', 'alone_fresh', 'alone_trained',
                                  'loop_1', 'loop_4', f'loop_{other}', 'loop_ahead')), r
    assert r['other_length'] == other
    assert math.isclose(r['loop_over_alone'], r['loop_4'] / r['alone'])
    assert math.isclose(r['loop_over_fresh'], r['loop_4'] / r['alone_fresh'])
    assert math.isclose(r['loop_over_trained'], r['loop_4'] / r['alone_trained'])
    assert math.isclose(r['ahead_over_fresh'], r['loop_ahead'] / r['alone_fresh'])
  # what exactness costs, at one cell: XLA's deterministic ops and TF32 matmuls
  assert [('alone_deterministic' in r, 'alone_tensorfloat32' in r) for r in grid] == [
      (False, False), (True, True)]
  assert grid[1]['alone_deterministic'] > 0 and grid[1]['alone_tensorfloat32'] > 0


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

"""The `accelerator` benchmark suite takes the tables and the grid's Ys it is
asked for (figures are printed by launch/benchmark.py --suite=accelerator on a
device, not asserted)."""

import os

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


@pytest.mark.slow  # a short training, a peer and ours trained towards its p@1
def test_the_panel_table_runs_the_config_beside_the_peers_on_every_thread(tmp_path, monkeypatch):
  """A libsvm pair by the panel's name: the config end to end (its fitted
  values shown), the peer on os.cpu_count() threads, and ours' seconds to the
  peer's p@1 (scored every REACH_EVERY of steps, for at most 2 s here)."""
  from tests import helpers
  from tests.peers_test import _easy
  from wsabie_jax.benchmarks import peers, reach
  from wsabie_jax.data.libsvm import write_libsvm
  if not peers.PEERS['sklearn_ovr'].available():
    pytest.skip('scikit-learn is not installed')
  write_libsvm(_easy(600), tmp_path / 'train.txt')
  write_libsvm(_easy(200, seed=1), tmp_path / 'test.txt')
  helpers.FakeClock(per_read=0.01).install(monkeypatch)
  monkeypatch.setattr(reach, 'REACH_WITHIN', 2.0)
  rows = accelerator.versus_peers([f'libsvm:{tmp_path / "train.txt"}:{tmp_path / "test.txt"}'],
                                  budget=2.0, peer_names=['sklearn_ovr'])
  [row] = rows
  assert row['config'] == tmp_path.name  # (a folder's train.txt is named by its folder)
  assert row['threads'] == os.cpu_count() and row['fitted']['train.batch_size'] > 0
  assert row['best_peer']['peer'] == 'sklearn_ovr' and 0 < row['best_peer']['p@1'] <= 1
  assert 0 < row['p@1'] <= 1 and row['test_images'] == 203
  reach = row['seconds_to_best_peer']
  assert reach is None or 0 < reach <= 2 * max(2.0, row['best_peer']['train_seconds'])

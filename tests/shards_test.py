"""Shards on disk: round trip, every pair once per epoch, training from them."""
import concurrent.futures
import math
import threading

import numpy as np

from wsabie_jax.api import configs, run
from wsabie_jax.data import batching, dataset, shards, synthetic
import pytest


def _one_hot_images(n, num_labels, seed=0):
  """Image i has the single feature i, so a batch row names its image."""
  rng = np.random.default_rng(seed)
  feats = [(np.array([i]), np.array([1.0])) for i in range(n)]
  labels = [rng.choice(num_labels, rng.integers(1, 4), replace=False) for _ in range(n)]
  return dataset.from_lists(feats, labels, n, [f'l{j}' for j in range(num_labels)])


def test_round_trip_and_meta(tmp_path):
  ds = _one_hot_images(50, 7)
  parts = [ds.subset(np.arange(s, min(s + 16, 50))) for s in range(0, 50, 16)]
  meta = shards.write_shard_set(tmp_path, parts, ds.label_names)
  assert [s['num_images'] for s in meta['shards']] == [16, 16, 16, 2]
  back = shards.ShardSet(tmp_path).load_all()
  for name in ('feat_indptr', 'feat_idx', 'feat_val', 'label_indptr', 'label_idx'):
    np.testing.assert_array_equal(getattr(back, name), getattr(ds, name), err_msg=name)
  np.testing.assert_array_equal(shards.ShardSet(tmp_path).label_frequencies(), ds.label_frequencies())


def test_stream_visits_every_pair_once_per_epoch(tmp_path):
  ds = _one_hot_images(40, 6, seed=1)
  shards.write_shard_set(tmp_path, [ds.subset(np.arange(s, s + 10)) for s in range(0, 40, 10)],
                         ds.label_names)
  stream = shards.ShardedPairStream(shards.ShardSet(tmp_path), batch_size=8, seed=3)
  want = sorted(zip(np.repeat(np.arange(40), np.diff(ds.label_indptr)).tolist(), ds.label_idx.tolist()))
  n = stream.num_examples
  got = []
  for step in range(-(-2 * n // 8)):
    b = stream.batch(step)
    assert b.feat_idx_BxF.shape == (8, 1) and b.pos_BxP.shape[0] == 8
    for img, label, pos in zip(b.feat_idx_BxF[:, 0], b.label_BxQ[:, 0], b.pos_BxP):
      assert label in pos
      got.append((int(img), int(label)))
  assert sorted(got[:n]) == want and sorted(got[n:2 * n]) == want
  assert got[:n] != got[n:2 * n]  # a new order every epoch
  again = shards.ShardedPairStream(shards.ShardSet(tmp_path), batch_size=8, seed=3)
  np.testing.assert_array_equal(again.batch(5).label_BxQ, stream.batch(5).label_BxQ)


def _shard_config(tmp_path):
  c = configs.load('wsabie_webscale:small')
  c.data.shards_dir = str(tmp_path / 'shards')
  c.data.num_train, c.data.shard_size = 4000, 1500
  c.data.synthetic.num_labels = 200
  spec = synthetic.SyntheticSpec(**c.data.synthetic)
  if not (tmp_path / 'shards').exists():
    for split, n in (('train', 4000), ('valid', 300), ('test', 300)):
      shards.write_synthetic(spec, tmp_path / 'shards' / split, n, c.data.shard_size, split)
  c.model.dim = 16
  return c


class _CountedLoads(shards.ShardSet):
  """A ShardSet that records which shards it loaded, in order."""

  def __init__(self, directory):
    super().__init__(directory)
    self.loaded, self._lock = [], threading.Lock()

  def load(self, i):
    with self._lock:
      self.loaded.append(i)
    return super().load(i)


def _small_shards(tmp_path, num_shards=6, per_shard=10):
  ds = _one_hot_images(num_shards * per_shard, 6, seed=2)
  shards.write_shard_set(tmp_path, [ds.subset(np.arange(s, s + per_shard))
                                    for s in range(0, num_shards * per_shard, per_shard)],
                         ds.label_names)
  return _CountedLoads(tmp_path)


def test_the_next_shard_loads_while_the_current_one_is_read(tmp_path):
  """The first batch of a shard starts the next AHEAD shards' loads (the next
  epoch's first after the last): a boundary finds them loaded. At most
  SHARDS_HELD are held, and each epoch loads each shard once."""
  shard_set = _small_shards(tmp_path)
  stream = shards.ShardedPairStream(shard_set, batch_size=4, seed=0)
  shard_set.loaded.clear()  # (the feature count's read of shard 0)
  stream.batch(0)
  for slot in range(1, 1 + shards.AHEAD):
    stream._held[(0, slot)].result()  # (the loads run on the stream's loader threads)
  order = stream._order(0)
  assert sorted(shard_set.loaded) == sorted(order[:1 + shards.AHEAD])
  steps_per_epoch = stream.num_examples // 4
  for step in range(1, steps_per_epoch):
    stream.batch(step)
    assert len(stream._held) <= shards.SHARDS_HELD
  for slot in range(shards.AHEAD):
    stream._held[(1, slot)].result()
  # (loads on two threads may append in either order)
  assert sorted(shard_set.loaded) == sorted([*range(6), *stream._order(1)[:shards.AHEAD]])


def test_batches_built_on_several_threads_equal_one_threads(tmp_path):
  """train.input_threads: a call's batches built by a pool of threads (in any
  interleaving, across shard boundaries) equal the batches built one by one."""
  one = shards.ShardedPairStream(_small_shards(tmp_path), batch_size=7, seed=3)
  many = shards.ShardedPairStream(shards.ShardSet(tmp_path), batch_size=7, seed=3)
  steps = range(3 * one.num_examples // 7)  # three epochs
  want = [one.batch(s) for s in steps]
  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    got = list(pool.map(many.batch, steps))
  for w, g in zip(want, got):
    for a, b in zip(w, g):
      np.testing.assert_array_equal(a, b)


def _rows_match_their_images(batch, ds, num_rows: int) -> None:
  """Each row of a one-hot shards' batch (its feature names its image) holds
  that image: value 1, its positives (padded with Y) and their count, a label
  among them, weight 1."""
  assert batch.feat_idx_BxF.shape[0] == num_rows
  for image, value, pos, num_pos, label, weight in zip(
      batch.feat_idx_BxF[:, 0], batch.feat_val_BxF[:, 0], batch.pos_BxP, batch.num_pos_B,
      batch.label_BxQ[:, 0], batch.weight_BxQ[:, 0]):
    labels = ds.label_idx[ds.label_indptr[image]:ds.label_indptr[image + 1]]
    assert value == 1 and weight == 1 and num_pos == len(labels) and label in labels
    np.testing.assert_array_equal(pos[:num_pos], labels)
    assert (pos[num_pos:] == ds.num_labels).all()


def test_a_call_is_built_in_place_as_its_batches_one_by_one(tmp_path):
  """dispatch.streamed_call: each batch gathered straight into its step of the
  call's stacked arrays (on a pool's threads, across shard and epoch
  boundaries, a process's rows alone) equals that batch built on its own, and
  every row holds its image; the steps past n are copies of the first."""
  from wsabie_jax.training import dispatch
  ds = _one_hot_images(60, 6, seed=2)
  stream = shards.ShardedPairStream(_small_shards(tmp_path), batch_size=7, seed=3)
  per_epoch = stream.num_examples // 7
  with concurrent.futures.ThreadPoolExecutor(3) as pool:
    for first, n, rows in ((0, 5, None), (per_epoch - 2, 4, None), (3, 2, (2, 6))):
      got = dispatch.streamed_call(stream, first, n, 6, rows, pool)
      want = [stream.batch(step, rows) for step in range(first, first + n)]
      for step in range(6):
        _rows_match_their_images(batching.step_view(got, step), ds,
                                 7 if rows is None else rows[1] - rows[0])
      for name, stacked in zip(batching.PairBatch._fields, got):
        alone = [getattr(b, name) for b in want]
        if stacked is None:
          assert all(a is None for a in alone), name
          continue
        np.testing.assert_array_equal(stacked[:n], np.stack(alone), err_msg=name)
        np.testing.assert_array_equal(stacked[n:], np.stack([alone[0]] * (6 - n)), err_msg=name)


@pytest.mark.slow  # whole trainings
def test_training_streams_from_shards(tmp_path):
  c = _shard_config(tmp_path)
  c.train.num_epochs = 2
  metrics = run.train_and_evaluate(c, tmp_path / 'run')
  assert metrics['num_images'] == 300 and metrics['epochs'] >= 2
  assert metrics['p@1'] > 2 * metrics['freq_p@1']


@pytest.mark.slow  # whole trainings
@pytest.mark.usefixtures('users_codegen')
def test_streamed_chunks_equal_one_step_per_call(tmp_path):
  """Shards stream as chunks of 5 stacked batches a call (built a thread ahead):
  bit-identical to one dispatch a step, and resumed mid-call (step 13) too."""
  from tests.train_test import _final_state, assert_same_states

  def config(steps, per_call):
    c = _shard_config(tmp_path)
    c.train.update(max_steps=steps, eval_every_steps=11, checkpoint_every_steps=1000,
                   steps_per_call=per_call, eval_subset=50, batch_size=64, deterministic=True)
    return c

  run.train_and_evaluate(config(24, 1), tmp_path / 'one')
  run.train_and_evaluate(config(24, 5), tmp_path / 'many')
  run.train_and_evaluate(config(13, 5), tmp_path / 'resumed')
  run.train_and_evaluate(config(24, 5), tmp_path / 'resumed')
  threaded = config(24, 5)
  threaded.train.input_threads = 3  # (a call's batches built on three threads)
  metrics = run.train_and_evaluate(threaded, tmp_path / 'threads')
  assert metrics['input_wait_seconds'] >= 0
  states = [_final_state('wsabie', config(24, 1), tmp_path / d)
            for d in ('one', 'many', 'resumed', 'threads')]
  assert int(states[0].step) == 24
  assert_same_states(*states[:3])
  assert_same_states(states[0], states[1], states[3])  # threads: the same batches


def test_the_input_suite_times_each_thread_count(tmp_path):
  """launch/benchmark.py --suite=input's rows (figures printed, not asserted)."""
  from wsabie_jax.benchmarks import suites
  _small_shards(tmp_path / 'train')
  rows = suites.input_rate(str(tmp_path), batch_size=4, threads=(1, 2), steps=20,
                           steps_per_call=8)
  assert [r['threads'] for r in rows] == [1, 2]
  assert all(r['pairs_per_sec'] > 0 and r['held_mib'] > 0 for r in rows)


def test_the_input_suite_sets_a_call_built_in_place_beside_one_stacked(tmp_path, monkeypatch):
  """benchmarks/call_building.py's rows: each way's min ≤ median ≤ max and
  their ratio (figures printed, not asserted); the shards loaded before the
  timed runs, none in them."""
  from wsabie_jax.benchmarks import call_building
  _small_shards(tmp_path / 'train')
  loaded, load = [], shards.ShardSet.load
  monkeypatch.setattr(shards.ShardSet, 'load', lambda self, i: loaded.append(i) or load(self, i))
  rows = call_building.compare(str(tmp_path), batch_size=4, threads=(1, 2), steps=20,
                               steps_per_call=8, runs=2)
  assert [r['threads'] for r in rows] == [1, 2]
  for r in rows:
    for way in call_building.WAYS:
      assert 0 < r[way][0] <= r[way][1] <= r[way][2], (way, r)
    assert math.isclose(r['ratio'], r['in place'][1] / r['stacked'][1])
  # (the feature count's read of shard 0, the preloading pass, its next loads ahead)
  assert len(loaded) <= 1 + 6 + shards.AHEAD, loaded


def test_workers_write_the_same_shards_and_print_nothing(tmp_path):
  """Several workers under the launch scripts' signal handlers (core/startup.py,
  core/signal_notes.py): the pool's SIGTERM at its end once printed a
  KeyboardInterrupt traceback from every idle worker (more workers than
  shards); the shards equal one worker's."""
  import subprocess
  import sys
  script = (
      'import sys\n'
      'from wsabie_jax.core import startup, signal_notes\n'
      'signal_notes.remembered()\n'
      'from wsabie_jax.data import shards, synthetic\n'
      'spec = synthetic.SyntheticSpec(num_labels=50, num_features=100, nnz=5)\n'
      'for i in range(10):\n'  # the race is the pool's end against idle workers: ten ends
      '  shards.write_synthetic(spec, f"{sys.argv[1]}/one{i}", 100, 100, workers=int(sys.argv[2]))\n'
      'shards.write_synthetic(spec, sys.argv[1] + "/four", 400, 100, workers=int(sys.argv[2]))\n')
  for workers in (1, 3):
    got = subprocess.run([sys.executable, '-c', script, str(tmp_path / str(workers)),
                          str(workers)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stderr == '', got.stderr
  one, three = (shards.ShardSet(tmp_path / w / 'four').load_all() for w in ('1', '3'))
  for name in ('feat_idx', 'feat_val', 'label_idx'):
    np.testing.assert_array_equal(getattr(one, name), getattr(three, name), err_msg=name)

"""training/hosts.py's decisions with a stand-in key-value store and clock, and
the mesh and row rules of several processes (parallel.py) with stand-in devices.
tests/multihost_test.py runs the real thing over 127.0.0.1."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from wsabie_jax.training import hosts, parallel

ROOT = pathlib.Path(__file__).resolve().parents[1]


class FakeStore:
  """The coordination service's key-value calls Peers makes."""

  def __init__(self):
    self.values, self.down = {}, False

  def key_value_set(self, key, value, allow_overwrite=False):
    self._check()
    assert allow_overwrite or key not in self.values
    self.values[key] = value

  def key_value_dir_get(self, prefix):
    self._check()
    return [(k, v) for k, v in self.values.items() if k.startswith(prefix)]

  def _check(self):
    if self.down:
      raise RuntimeError('UNAVAILABLE: Connection reset by peer')


class FakeClock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


@pytest.fixture(autouse=True)
def whereabouts(monkeypatch, tmp_path):
  for name in ('100', '200', '300.orbax-checkpoint-tmp-1'):  # 300: a save never finished
    (tmp_path / name).mkdir()
  monkeypatch.setattr(hosts, 'WHEREABOUTS', hosts.Whereabouts(step=300, checkpoints=tmp_path))


def _peers(store, clock, me=0, count=3, timeout=10.0):
  return hosts.Peers(timeout, process=me, count=count, client=store, clock=clock)


def test_a_silent_peer_is_named_after_the_timeout_not_before():
  store, clock = FakeStore(), FakeClock()
  peers = [_peers(store, clock, me=i) for i in range(3)]
  for p in peers:
    p.beat()
  assert peers[0].verdict() is None
  for t in (4.0, 8.0, 9.9):  # 0 and 2 beat on, 1 has gone silent since t = 0
    clock.now = t
    peers[0].beat()
    peers[2].beat()
    assert peers[0].verdict() is None, t
  clock.now = 10.0
  assert peers[0].verdict() == ('process 1 stopped answering at step 300; the last checkpoint '
                                'is step 200; restart every process to resume')


def test_a_peer_that_finished_is_never_named():
  store, clock = FakeStore(), FakeClock()
  a, b = _peers(store, clock, me=0, count=2), _peers(store, clock, me=1, count=2)
  b.beat()
  assert a.verdict() is None
  with b:  # b finishes (leaves its context without an error) and stops beating
    pass
  clock.now = 1000.0
  assert a.verdict() is None


def test_a_beating_peer_is_never_named():
  store, clock = FakeStore(), FakeClock()
  a, b = _peers(store, clock, me=0, count=2), _peers(store, clock, me=1, count=2)
  for t in range(100):
    clock.now = t * 3.0
    b.beat()
    assert a.verdict() is None


def test_a_published_failure_is_named_at_once_and_acknowledged():
  store, clock = FakeStore(), FakeClock()
  a, b = _peers(store, clock, me=0, count=2), _peers(store, clock, me=1, count=2)
  store.key_value_set('wsabie/failed/1', 'error: data/train.txt line 3: NaN')
  assert a.verdict() == ('process 1 failed (data/train.txt line 3: NaN) at step 300; the last '
                         'checkpoint is step 200; restart every process to resume')
  assert store.values['wsabie/seen/0'] == 'error: data/train.txt line 3: NaN'
  b.publish_failure('error: data/train.txt line 3: NaN')  # returns: every peer has seen it


def test_an_unreachable_service_is_the_coordinators_death():
  store, clock = FakeStore(), FakeClock()
  a = _peers(store, clock, me=1, count=2)
  store.down = True
  assert a.verdict() is None
  clock.now = 9.0
  assert a.verdict() is None
  clock.now = 10.5
  assert a.verdict().startswith('process 0 (the coordinator) stopped answering')


def test_an_error_leaving_the_context_is_published_and_exits():
  store, clock = FakeStore(), FakeClock()
  codes = []
  peers = hosts.Peers(10.0, process=1, count=2, client=store, clock=clock, exit=codes.append)
  store.key_value_set('wsabie/seen/0', 'x')  # process 0 reads it at once
  with pytest.raises(SystemExit), peers:  # (the stand-in exit returns)
    raise SystemExit('error: config.train.batch_size=0: expected at least 1')
  assert store.values['wsabie/failed/1'] == 'error: config.train.batch_size=0: expected at least 1'
  assert codes == [1]


def test_one_process_watches_nothing():
  with hosts.Peers(1.0, process=0, count=1, client=None, exit=pytest.fail):
    pass


def test_describe_before_training(tmp_path):
  assert hosts.Whereabouts().describe() == ' before training began'
  assert hosts.Whereabouts(step=5, checkpoints=tmp_path / 'none').describe() == (
      ' at step 5; no checkpoint was saved yet; restart every process to resume')


@pytest.mark.parametrize('environ,found', [
    ({}, None), ({'SLURM_NTASKS': '1'}, None), ({'SLURM_NTASKS': '4'}, 'SLURM'),
    ({'OMPI_COMM_WORLD_SIZE': '2'}, 'Open MPI'), ({'TPU_WORKER_HOSTNAMES': 'a'}, None),
    ({'TPU_WORKER_HOSTNAMES': 'a,b,c,d'}, 'a Cloud TPU pod slice')])
def test_a_cluster_launch_is_detected_from_its_environment(environ, found):
  assert hosts.detected_cluster(environ) == found


@pytest.mark.parametrize('mode,coordinator,environ,joins', [
    ('auto', None, {}, False), ('auto', '10.0.0.1:1234', {}, True),
    ('auto', None, {'SLURM_NTASKS': '8'}, True), ('on', None, {}, True),
    ('off', '10.0.0.1:1234', {'SLURM_NTASKS': '8'}, False)])
def test_initialize_joins_when_told_or_launched_as_one_of_several(monkeypatch, mode, coordinator,
                                                                  environ, joins):
  calls = []
  monkeypatch.setattr(hosts.jax.distributed, 'initialize',
                      lambda *a, **kw: calls.append((a, kw)))
  for key in ('SLURM_NTASKS', 'OMPI_COMM_WORLD_SIZE', 'TPU_WORKER_HOSTNAMES'):
    monkeypatch.delenv(key, raising=False)
  for key, value in environ.items():
    monkeypatch.setenv(key, value)
  assert hosts.initialize(coordinator, 2 if coordinator else None, 0 if coordinator else None,
                          mode=mode, initialization_timeout=7, heartbeat_timeout=9) == joins
  assert calls == ([((coordinator, 2 if coordinator else None, 0 if coordinator else None),
                     {'initialization_timeout': 7, 'heartbeat_timeout_seconds': 18})]
                   if joins else [])


# --- the mesh and the rows of several processes ---------------------------------

def _devices(per_process: list[int]):
  return [types.SimpleNamespace(id=10 * p + i, process_index=p, platform='cpu')
          for p, n in enumerate(per_process) for i in range(n)]


@pytest.mark.parametrize('num_devices,want', [(0, [0, 1, 10, 11]), (4, [0, 1, 10, 11]),
                                              (2, [0, 10])])
def test_a_mesh_takes_the_same_number_from_every_process(monkeypatch, num_devices, want):
  monkeypatch.setattr(parallel.jax, 'process_count', lambda: 2)
  got = parallel._from_every_process(_devices([2, 2]), [0, 1], num_devices)
  assert [d.id for d in got] == want


@pytest.mark.parametrize('num_devices', [3, 6, 1])
def test_a_mesh_that_cannot_span_every_process_evenly_is_an_error(monkeypatch, num_devices):
  monkeypatch.setattr(parallel.jax, 'process_count', lambda: 2)
  with pytest.raises(ValueError, match='cannot be split evenly over 2 processes'):
    parallel._from_every_process(_devices([2, 2]), [0, 1], num_devices)


def test_a_mesh_that_leaves_out_a_process_is_an_error(monkeypatch):
  monkeypatch.setattr(parallel.jax, 'process_count', lambda: 3)
  with pytest.raises(ValueError, match='a mesh must span every process'):
    parallel._from_every_process(_devices([2, 2]), [0, 1], 0)


def test_processes_rows_tile_the_batch(monkeypatch):
  monkeypatch.setattr(parallel.jax, 'process_count', lambda: 4)
  rows = []
  for i in range(4):
    monkeypatch.setattr(parallel.jax, 'process_index', lambda i=i: i)
    rows.append(parallel.local_rows(64))
  assert rows == [(0, 16), (16, 32), (32, 48), (48, 64)]


def test_a_streamed_batchs_rows_are_its_slice(tmp_path):
  """ShardedPairStream.batch(s, rows) is batch(s)[rows], across shard and epoch ends."""
  from wsabie_jax.data import shards, synthetic
  spec = synthetic.SyntheticSpec(num_labels=20, num_features=50, nnz=5)
  shards.write_synthetic(spec, tmp_path, 130, 40)
  stream = shards.ShardedPairStream(shards.ShardSet(tmp_path), batch_size=48, seed=3)
  for step in range(12):  # several epochs: batches straddle shards and epochs
    whole = stream.batch(step)
    for lo, hi in ((0, 24), (24, 48), (12, 36)):
      part = stream.batch(step, rows=(lo, hi))
      for key, value in whole._asdict().items():
        if value is not None:
          np.testing.assert_array_equal(getattr(part, key), value[lo:hi], err_msg=f'{step} {key}')


# --- launch/local_cluster.py's supervisor ----------------------------------------

def test_the_local_cluster_prefixes_output_and_returns_the_first_failure(capsys):
  """Each process starts through a shim, not a preexec_fn (Python run in the
  forked child of this multithreaded process, JAX's threads: JAX warns of a
  possible deadlock at every start): no warning."""
  import warnings
  import jax
  from wsabie_jax.api import local_cluster
  jax.devices()  # (JAX warns at a fork once its runtime has started)
  py = lambda code: [sys.executable, '-c', code]
  with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter('always')
    assert local_cluster.run_cluster([py('print("a")'), py('print("b")')], {}, 1.0) == 0
  assert sorted(capsys.readouterr().out.splitlines()) == ['[p0] a', '[p1] b']
  assert not [w for w in said if 'fork' in str(w.message) or 'unclosed' in str(w.message)], \
      [str(w.message) for w in said]
  # One fails; the other would run for ever: killed after the grace period.
  status = local_cluster.run_cluster([py('import sys; sys.exit(3)'),
                                      py('import time; time.sleep(600)')], {}, 0.5)
  assert status == 3
  assert 'process 1 still running 0 s after a peer failed or a signal: killing it' in \
      capsys.readouterr().out


def test_the_shim_runs_the_command_only_while_its_supervisor_lives():
  """local_cluster's start shim: under this process it becomes the command
  (the same pid, its exit status); told another parent (the supervisor died
  before it asked for SIGTERM at its death), it stops with 128 + SIGTERM and
  runs nothing."""
  from wsabie_jax.api import local_cluster
  cmd = [sys.executable, '-c', 'import os, sys; print("ran", os.getpid()); sys.exit(7)']
  live = subprocess.Popen(local_cluster.dying_with_this_process(cmd), stdout=subprocess.PIPE,
                          text=True)
  out, _ = live.communicate(timeout=60)
  assert live.returncode == 7 and out.split() == ['ran', str(live.pid)]
  orphan = subprocess.run([sys.executable, '-c', local_cluster._DIE_WITH_PARENT, '1', *cmd],
                          capture_output=True, text=True, timeout=60)
  assert orphan.returncode == 128 + signal.SIGTERM and 'ran' not in orphan.stdout


# A process that says which signals it got, as training does: it saves, and exits 128 + n.
_CHILD = '''
import signal, sys, time
got = []
def handle(n, f):
  got.append(n)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
  signal.signal(s, handle)
print('ready', flush=True)
deadline = time.monotonic() + 60
while not got and time.monotonic() < deadline:
  time.sleep(0.01)
time.sleep(0.3)  # a second signal would arrive meanwhile
print('got', [signal.Signals(n).name for n in got], flush=True)
sys.exit(128 + got[0] if got else 9)
'''
_SUPERVISOR = '''
import sys
from wsabie_jax.api import local_cluster
cmd = [sys.executable, '-c', sys.argv[1]]
sys.exit(local_cluster.run_cluster([cmd, cmd], {}, 30.0))
'''


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_local_cluster_passes_a_signal_once_to_every_process(signum):
  """Ctrl-C to local_cluster.py's process group does not SIGKILL the trainings
  mid-save, nor SIGTERM to it alone orphan them. Ctrl-C at a terminal
  signals the whole group: the processes run in sessions of their own, so
  each gets the signal once, from the supervisor, and is waited for."""
  sup = subprocess.Popen([sys.executable, '-c', _SUPERVISOR, _CHILD], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
  try:
    lines = []
    while sum('ready' in line for line in lines) < 2:
      lines.append(sup.stdout.readline())
      assert lines[-1], lines
    os.killpg(sup.pid, signum)  # as a terminal does: the group
    out, _ = sup.communicate(timeout=60)
  finally:
    sup.kill()
  got = [line for line in out.splitlines() if ' got ' in line]
  assert sorted(got) == [f"[p{i}] got ['{signum.name}']" for i in range(2)], out
  assert sup.returncode == 128 + signum


def test_the_local_clusters_processes_stop_when_it_is_killed(tmp_path):
  """SIGKILL of the supervisor: each process is sent SIGTERM (saves, stops)."""
  tmp_path = tmp_path / 'said'
  tmp_path.mkdir()
  # Each child writes what it got whole (a rename): one seen half-written read
  # as an empty file on a loaded machine.
  child = _CHILD.replace("print('got'", (
      f"import os; part = '{tmp_path}/.' + str(os.getpid()); open(part, 'w').write(str(got)); "
      f"os.replace(part, '{tmp_path}/' + str(os.getpid())); print('got'"))
  sup = subprocess.Popen([sys.executable, '-c', _SUPERVISOR, child], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  try:
    ready = 0
    while ready < 2:
      line = sup.stdout.readline()
      assert line
      ready += 'ready' in line
    sup.kill()
    sup.wait(timeout=10)
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob('[!.]*'))) < 2 and time.monotonic() < deadline:
      time.sleep(0.05)
  finally:
    sup.kill()
  # (a second SIGTERM may follow the first: training saves once either way)
  said = [json.loads(p.read_text()) for p in tmp_path.glob('[!.]*')]
  assert len(said) == 2 and all(set(got) == {signal.SIGTERM} for got in said), said


def test_the_local_cluster_environment_forces_its_devices(monkeypatch):
  from wsabie_jax.api import local_cluster
  monkeypatch.setenv('XLA_FLAGS', '--xla_force_host_platform_device_count=4 --xla_other=1')
  env = local_cluster.environment(2)
  assert env['XLA_FLAGS'].split() == ['--xla_other=1', '--xla_force_host_platform_device_count=2']
  assert env['JAX_PLATFORMS'] == 'cpu'
  cmds = local_cluster.commands('launch/train.py', ['--workdir=w'], 2, 1234)
  assert cmds[1][-4:] == ['--workdir=w', '--coordinator_address=127.0.0.1:1234',
                          '--num_processes=2', '--process_id=1']


# --- processes started with different runs ----------------------------------

def _agree(store, runs: dict, me: int, count: int, clock=None, timeout=60.0):
  clock = clock or FakeClock()
  def sleep(s):
    clock.now += s
  for p, run in runs.items():  # the others' published runs
    if p != me:
      store.values[f'wsabie/run/{p}'] = json.dumps(run, sort_keys=True)
  hosts.check_same_run(runs[me], timeout, process=me, count=count, client=store, clock=clock,
                       sleep=sleep)


def test_processes_with_the_same_run_agree():
  run = {'workdir': '/w', 'model.dim': 64, 'data.train_path': 'abc'}
  for me in range(3):
    _agree(FakeStore(), {p: dict(run) for p in range(3)}, me, 3)


@pytest.mark.parametrize('me', [0, 1])
def test_a_different_setting_on_one_process_stops_every_process_naming_it(me):
  """A different model.dim on each process neither aborts one in gloo while
  the other blames a dead peer, nor a different --workdir hangs both after saving."""
  runs = {0: {'workdir': '/w', 'model.dim': 64, 'train.seed': 0},
          1: {'workdir': '/v', 'model.dim': 32, 'train.seed': 0}}
  with pytest.raises(hosts.Disagree, match=r"different runs: model.dim \(64 on process 0, 32 on "
                     r"process 1\); workdir \('/w' on process 0, '/v' on process 1\); start "
                     'every process with the same flags'):
    _agree(FakeStore(), runs, me, 2)


def test_a_process_that_never_says_is_named_after_the_timeout():
  clock, store = FakeClock(), FakeStore()
  store.values['wsabie/run/1'] = json.dumps({'a': 1})
  with pytest.raises(hosts.Disagree, match=r'process 2 of 3 did not start the run within 60 s'):
    hosts.check_same_run({'a': 1}, 60.0, process=0, count=3, client=store, clock=clock,
                         sleep=lambda s: setattr(clock, 'now', clock.now + s))
  assert 60.0 <= clock.now < 61.0


def test_compare_hosts_reads_timings_as_no_difference():
  """launch/compare_hosts.py says whether the runs' test metrics are identical:
  the clock's figures (the steps' seconds, the wait for input, pairs/s) are
  left out; it once counted the input wait and said DIFFER of equal runs."""
  from wsabie_jax.api import local_cluster
  one = {'p@1': 0.27, 'map': 0.24, 'train_seconds': 35.7, 'input_wait_seconds': 3.5,
         'train_examples_per_sec': 10_364.0}
  several = {**one, 'train_seconds': 49.9, 'input_wait_seconds': 9.3,
             'train_examples_per_sec': 4_860.0}
  assert local_cluster.same_metrics(one, several)
  assert not local_cluster.same_metrics(one, {**several, 'map': 0.25})

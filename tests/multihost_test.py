"""Several processes train as one (training/hosts.py, training/parallel.py).

Each cluster here is launch/train.py in 2 processes × 2 CPU devices joined
through jax.distributed over 127.0.0.1 (a free port; launch/local_cluster.py
builds the commands), as hosts of a pod slice would run it. Every process
started is waited for with a timeout and killed at the end, whatever happens.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.api import local_cluster as cluster

pytestmark = pytest.mark.slow  # several processes, each a whole training

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT = 300  # seconds a cluster may take before the test fails (it takes ~15)
SMALL = ['--config=configs/wsabie_synthetic.py:small', '--config.train.max_steps=100',
         '--config.train.eval_every_steps=25', '--config.train.checkpoint_every_steps=50',
         '--config.train.num_devices=4']
TIMES = {'train_seconds', 'train_examples_per_sec', 'input_wait_seconds'}




class Run:
  """Processes started together; each one's exit status and output once ended."""

  def __init__(self, args, processes: int = 2, devices: int = 2, heartbeat: int = 30,
               script: str = 'launch/train.py'):
    args = [*args, f'--heartbeat_timeout={heartbeat}', '--initialization_timeout=120']
    if processes == 1:
      cmds = [[sys.executable, script, *args]]
    else:
      cmds = cluster.commands(script, args, processes, cluster.free_port())
    self.procs = [subprocess.Popen(c, cwd=ROOT, env=cluster.environment(devices),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for c in cmds]
    self.outputs = [None] * len(self.procs)

  def kill(self, i: int):
    self.procs[i].send_signal(signal.SIGKILL)

  def wait(self, i: int | None = None, timeout: float = TIMEOUT):
    """(exit status, stdout, stderr) of process i, or of all when None."""
    which = range(len(self.procs)) if i is None else [i]
    deadline = time.monotonic() + timeout
    try:
      for j in which:
        if self.outputs[j] is None:
          out, err = self.procs[j].communicate(timeout=max(deadline - time.monotonic(), 0.1))
          self.outputs[j] = (self.procs[j].returncode, out, err)
    except subprocess.TimeoutExpired:
      self.stop()
      pytest.fail(f'processes still running after {timeout} s')
    return self.outputs if i is None else self.outputs[i]

  def succeed(self):
    for rc, out, err in self.wait():
      assert rc == 0, err[-4000:]
    return self.outputs

  def stop(self):
    for p in self.procs:
      if p.poll() is None:
        p.kill()
      p.communicate()


def _train(workdir, *args, base=SMALL, **kw):
  run = Run([*base, f'--workdir={workdir}', *args], **kw)
  try:
    return run.succeed()
  finally:
    run.stop()


def _metrics(workdir) -> dict:
  metrics = json.loads((pathlib.Path(workdir) / 'metrics.json').read_text())
  return {k: v for k, v in metrics.items() if k not in TIMES}


def _checksums(outputs) -> list[str]:
  return [re.search(r'has checksum (\w+)', err).group(1) for _, _, err in outputs]


def _wait_for(path: pathlib.Path, run: Run, timeout: float = TIMEOUT):
  deadline = time.monotonic() + timeout
  while not path.exists():
    if any(p.poll() is not None for p in run.procs) or time.monotonic() > deadline:
      run.stop()
      pytest.fail(f'{path} never appeared: {run.wait(0)[2][-3000:]}')
    time.sleep(0.02)


def _states(workdir):
  """The workdir's latest and best states, restored by this (single) process."""
  from wsabie_jax.api import run
  restored = run.Restored(workdir)
  return [np.asarray(x) for x in jax.tree.leaves((restored.latest_state(), restored.state))]


# Patience 1 over validations every 10 steps: the runs drop their rate on a
# plateau (restoring the best on every process) before they end.
DROPS = ['--config.train.eval_every_steps=10', '--config.train.patience=1',
         '--config.train.plateau_drops=2']


@pytest.fixture(scope='module')
def two_processes(tmp_path_factory):
  workdir = tmp_path_factory.mktemp('two')
  return workdir, _train(workdir, *DROPS)


@pytest.fixture(scope='module')
def one_process(tmp_path_factory):
  workdir = tmp_path_factory.mktemp('one')
  _train(workdir, *DROPS, processes=1, devices=4)
  return workdir


def test_two_processes_train_as_one_process_of_four_devices(two_processes, one_process):
  """Every process sees the 4 global devices and ends with the same replica,
  through the rate drops; the test metrics equal one process driving 4
  devices, exactly."""
  workdir, outputs = two_processes
  assert _metrics(workdir)['rate_drops'] >= 1
  for _, _, err in outputs:
    assert 'data parallel over 4 devices (2 a process, 2 processes)' in err
  sums = _checksums(outputs)
  assert sums[0] == sums[1], sums
  assert _metrics(workdir) == _metrics(one_process)


def test_one_writer_for_the_workdir(two_processes):
  workdir, _ = two_processes
  assert len(list((workdir / 'tensorboard').iterdir())) == 1
  json.loads((workdir / 'config.json').read_text())
  steps = [json.loads(line)['step'] for line in (workdir / 'history.jsonl').read_text().splitlines()]
  assert steps == list(range(10, steps[-1] + 1, 10))  # each validation once, not once a process
  assert (workdir / 'LOCK').read_text() == ''  # released


def test_kill_both_after_a_checkpoint_then_resume(two_processes, tmp_path):
  """SIGKILL both once step 50 is saved; restarted, they end where the
  uninterrupted run ended, bit for bit (its rate drops included)."""
  straight, _ = two_processes
  run = Run([*SMALL, *DROPS, f'--workdir={tmp_path}'])
  try:
    _wait_for(tmp_path / 'checkpoints' / '50', run)
    run.kill(0)
    run.kill(1)
    run.wait()
  finally:
    run.stop()
  assert not (tmp_path / 'metrics.json').exists(), 'the kill came after the end'
  outputs = _train(tmp_path, *DROPS)
  assert all('resumed from step 50' in err for _, _, err in outputs)
  assert _metrics(tmp_path) == _metrics(straight)
  for a, b in zip(_states(tmp_path), _states(straight)):
    np.testing.assert_array_equal(a, b)


def _kill_mid_run(workdir, victim: int, heartbeat: int):
  """Kills process `victim` once step 50 is saved; the other's (exit status,
  stderr, seconds from the kill to its exit)."""
  run = Run([*SMALL, f'--workdir={workdir}', '--config.train.max_steps=100000'],
            heartbeat=heartbeat)
  try:
    _wait_for(workdir / 'checkpoints' / '50', run)
    run.kill(victim)
    killed = time.monotonic()
    rc, _, err = run.wait(1 - victim, timeout=heartbeat + 60)
    return rc, err, time.monotonic() - killed
  finally:
    run.stop()


def test_a_dead_peer_stops_the_others_with_one_line(tmp_path):
  """Process 1 killed mid-run: process 0 exits with status 1 and one line
  within the heartbeat timeout (plus start-up slack), and what it saved restores."""
  heartbeat = 8  # seconds: short, yet far above a beat's delay on a loaded machine
  rc, err, took = _kill_mid_run(tmp_path, victim=1, heartbeat=heartbeat)
  last = err.strip().splitlines()[-1]
  assert rc == 1, err[-3000:]
  assert re.fullmatch(r'error: process 1 stopped answering at step \d+; the last checkpoint is '
                      r'step \d+; restart every process to resume', last), last
  assert heartbeat * 0.5 < took < heartbeat + 60
  from wsabie_jax.api import run as run_lib
  assert int(run_lib.Restored(tmp_path).state.step) >= 50


def test_the_coordinators_death_stops_the_others_with_one_line(tmp_path):
  """Process 0 (and the coordination service with it) killed: JAX's runtime
  aborts process 1 at once (its error callback is not ours to replace), and
  its report is replaced by one line naming the cause, the step and the last
  checkpoint (last_word.py); the report itself is kept in the file it names,
  not printed as a 50-line native stack and faulthandler dump."""
  rc, err, _ = _kill_mid_run(tmp_path, victim=0, heartbeat=20)
  assert rc != 0
  last = err.strip().splitlines()[-1]
  match = re.fullmatch(r"error: process 0 \(the coordinator\) stopped answering at step \d+; the "
                       r"last checkpoint is step \d+; restart every process to resume \(the "
                       r"runtime's report: (\S+)\)", last)
  assert match, err[-3000:]
  report = pathlib.Path(match.group(1)).read_text()
  assert 'JAX distributed service detected fatal errors' in report
  assert 'Check failure stack trace' not in err


def test_a_time_budget_stops_every_process_at_the_same_step(tmp_path):
  """Each process reads its own clock; the stop (and the validation interval
  fitted to the budget) is process 0's on all (parallel.agreed), so both
  stop at one step with one replica, whichever step that is."""
  outputs = _train(tmp_path, '--config.train.max_steps=0', '--config.train.num_epochs=100000',
                   '--config.train.max_seconds=4', '--config.train.evals_per_budget=4')
  stops = [re.search(r'stopping at step (\d+): max_seconds', err).group(1) for _, _, err in outputs]
  assert stops[0] == stops[1], stops
  assert len(set(_checksums(outputs))) == 1


def test_a_failing_process_stops_the_others(tmp_path):
  """Process 0 cannot take the workdir (another run holds its lock): both
  stop at once, process 1 saying why."""
  import fcntl
  fd = os.open(tmp_path / 'LOCK', os.O_RDWR | os.O_CREAT)
  fcntl.flock(fd, fcntl.LOCK_EX)
  os.write(fd, json.dumps({'pid': 1, 'host': 'elsewhere', 'started': 'now'}).encode())
  run = Run([*SMALL, f'--workdir={tmp_path}'])
  try:
    (rc0, _, err0), (rc1, _, err1) = run.wait(timeout=120)
  finally:
    run.stop()
    os.close(fd)
  assert rc0 == rc1 == 1
  assert err0.strip().splitlines()[-1].startswith(f'error: {tmp_path} is in use by pid 1')
  assert err1.strip().splitlines()[-1].startswith(
      f'error: process 0 failed ({tmp_path} is in use by pid 1')


def test_each_process_builds_only_its_rows_of_streamed_batches(tmp_path):
  """Shards streamed from disk: process i reads and pads only rows
  [i·B/2, (i+1)·B/2) of each batch, and the result is one process's."""
  from wsabie_jax.data import shards, synthetic
  spec = synthetic.SyntheticSpec(num_labels=50, num_features=200, nnz=8)
  for split, n in (('train', 1200), ('valid', 100), ('test', 100)):
    shards.write_synthetic(spec, tmp_path / 'data' / split, n, 500, split)
  args = ['--config=configs/wsabie_webscale.py:small', f'--config.data.shards_dir={tmp_path / "data"}',
          '--config.train.max_steps=30', '--config.train.batch_size=64',
          '--config.train.eval_every_steps=15', '--config.train.checkpoint_every_steps=15',
          '--config.train.num_devices=4', '--config.model.dim=16', '--config.loss.num_draws=10']
  outputs = _train(tmp_path / 'two', *args, base=[])
  assert 'process 0 builds rows 0-31 of each batch of 64' in outputs[0][2]
  assert 'process 1 builds rows 32-63 of each batch of 64' in outputs[1][2]
  _train(tmp_path / 'one', *args, base=[], processes=1, devices=4)
  assert _metrics(tmp_path / 'two') == _metrics(tmp_path / 'one')


def test_skipgram_on_two_processes_saves_and_resumes(tmp_path):
  """Paper 004's step (partitioned by XLA) on two processes: a run ended at
  step 10 and resumed to 20 by both processes, their replicas equal."""
  args = ['--config=configs/skipgram_synthetic.py:proposed,small', '--config.oov.steps=0',
          '--config.train.batch_size=32', '--config.train.eval_every_steps=5',
          '--config.train.checkpoint_every_steps=10', '--config.train.num_devices=4',
          f'--workdir={tmp_path}']
  first = Run([*args, '--config.train.max_steps=10']).succeed()
  assert len(set(_checksums(first))) == 1
  outputs = Run([*args, '--config.train.max_steps=20']).succeed()
  assert all('resumed from step 10' in err for _, _, err in outputs)
  assert len(set(_checksums(outputs))) == 1
  assert _checksums(outputs) != _checksums(first)
  assert _metrics(tmp_path)['steps'] == 20


def test_evaluate_and_annotate_read_a_two_process_workdir(two_processes, tmp_path):
  """One process (one device) reads what two wrote."""
  workdir, _ = two_processes
  env = helpers.one_device_env(JAX_PLATFORMS='cpu')
  out = subprocess.run([sys.executable, 'launch/evaluate.py', f'--workdir={workdir}', '--json'], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
  assert out.returncode == 0, out.stderr[-3000:]
  got, want = json.loads(out.stdout), _metrics(workdir)
  for key in ('p@1', 'p@10', 'map'):
    assert got[key] == pytest.approx(want[key], abs=1e-6), key
  from wsabie_jax.data import libsvm, synthetic
  from wsabie_jax.api import configs
  spec = synthetic.SyntheticSpec(**configs.load('wsabie_synthetic:small').data.synthetic)
  libsvm.write_libsvm(synthetic.generate(spec, 3, split='test'), tmp_path / 'new.txt')
  out = subprocess.run([sys.executable, 'launch/annotate.py', f'--workdir={workdir}',
                        f'--input={tmp_path / "new.txt"}', '--k=4'],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
  assert out.returncode == 0, out.stderr[-3000:]
  assert [line[:4] for line in out.stdout.splitlines()] == ['0: g', '1: g', '2: g']


def test_processes_started_with_different_settings_each_stop_with_one_line(tmp_path):
  """A different model.dim on each process must not abort one in gloo while
  the other blames 'process 1 stopped answering', nor a different --workdir
  on each hang both after saving. Every process stops before reading data, with
  one line naming the fields."""
  cmds = cluster.commands('launch/train.py', [*SMALL, f'--workdir={tmp_path / "a"}',
                                              '--initialization_timeout=120'],
                          2, cluster.free_port())
  cmds[1] = [a.replace(str(tmp_path / 'a'), str(tmp_path / 'b')) for a in cmds[1]]
  cmds[1].append('--config.model.dim=32')
  procs = [subprocess.Popen(c, cwd=ROOT, env=cluster.environment(2), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True) for c in cmds]
  try:
    outputs = [p.communicate(timeout=120) for p in procs]
  finally:
    for p in procs:
      p.kill()
  for p, (_, err) in zip(procs, outputs):
    last = err.strip().splitlines()[-1]
    assert p.returncode == 1 and re.fullmatch(
        r'error: the processes were started with different runs: model.dim \(\d+ on process 0, '
        r"32 on process 1\); workdir \('.*/a' on process 0, '.*/b' on process 1\); start every "
        r'process with the same flags', last), err[-3000:]
  assert not (tmp_path / 'a').exists() and not (tmp_path / 'b').exists()


def _one_of_two(tmp_path, process_id: int, port: int, timeout: int = 6):
  cmd = cluster.commands('launch/train.py', [*SMALL, f'--workdir={tmp_path / "run"}',
                                             f'--initialization_timeout={timeout}'], 2, port)[
                                                 process_id]
  start = time.monotonic()
  out = subprocess.run(cmd, cwd=ROOT, env=cluster.environment(2), capture_output=True, text=True,
                       timeout=120)
  return out, time.monotonic() - start


@pytest.mark.parametrize('process_id', [0, 1])
def test_a_peer_that_never_joins_is_one_line_within_the_timeout(tmp_path, process_id):
  """Not a C++ abort (a 30-line stack dump, status 134) at the runtime's
  initialization timeout."""
  out, took = _one_of_two(tmp_path, process_id, cluster.free_port())
  last = out.stderr.strip().splitlines()[-1]
  assert out.returncode == 1 and re.fullmatch(
      r'error: the 2 processes did not all join at 127.0.0.1:\d+ within 6 s \(one not started, '
      r'or a different --coordinator_address or --num_processes on one\); nothing was written',
      last), out.stderr[-3000:]
  assert 'Check failure' not in out.stderr and took < 60
  assert not (tmp_path / 'run').exists()


def test_the_coordinators_port_in_use_is_one_line(tmp_path):
  """Not a 26-line traceback on process 0 with the peer aborted in C++."""
  import socket
  with socket.socket() as busy:
    busy.bind(('127.0.0.1', 0))
    busy.listen()
    port = busy.getsockname()[1]
    out, _ = _one_of_two(tmp_path, 0, port)
  assert out.returncode == 1 and out.stderr.strip().splitlines()[-1] == (
      f'error: --coordinator_address=127.0.0.1:{port}: port {port} is in use by another program; '
      'pick a free port (the same on every process)'), out.stderr[-3000:]

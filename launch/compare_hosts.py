"""Several processes against one, side by side: the same run on P processes of
D/P CPU devices each (launch/local_cluster.py) and on one process of D devices.

  python launch/compare_hosts.py --workdir=/tmp/hosts [--processes=2 --devices=4] \
      [--peer_death] -- --config=configs/wsabie_synthetic.py:small

Prints, for each: test p@1 and MAP, steps, pairs/s, what each process held of
the input (its calls' rows and the stream's shard) and its peak memory; then
the largest difference between the two final states (relative to the
largest value of each array) and whether every process ended on the same
replica. With --peer_death, a third P-process run whose last process is
killed once the first checkpoint is saved: the seconds until the others
exit, and their last line. Localhost figures: for information (the
processes share this machine's cores), not a speed target.
"""
import json
import pathlib
import re
import signal
import subprocess
import sys
import time

from absl import flags, logging

import jax
import numpy as np

from wsabie_jax.api import cli, local_cluster as cluster

ROOT = pathlib.Path(__file__).resolve().parents[1]
_WORKDIR = flags.DEFINE_string('workdir', None, 'Scratch folder for the runs.', required=True)
_PROCESSES = flags.DEFINE_integer('processes', 2, 'Processes of the several-process run.')
_DEVICES = flags.DEFINE_integer('devices', 4, 'CPU devices in all (split over the processes).')
_PEER_DEATH = flags.DEFINE_bool('peer_death', False, 'Also time a peer\'s death to the exit.')
_HEARTBEAT = flags.DEFINE_integer('heartbeat_timeout', 30, 'Passed to launch/train.py.')




def _start(args, processes: int) -> list[subprocess.Popen]:
  args = [*args, f'--heartbeat_timeout={_HEARTBEAT.value}']
  cmds = ([[sys.executable, 'launch/train.py', *args]] if processes == 1
          else cluster.commands('launch/train.py', args, processes, cluster.free_port()))
  env = cluster.environment(_DEVICES.value // processes)
  return [subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True) for c in cmds]


def _run(args, workdir: pathlib.Path, processes: int) -> dict:
  procs = _start([*args, f'--workdir={workdir}'], processes)
  logs = []
  for p in procs:
    _, err = p.communicate()
    if p.returncode:
      raise SystemExit(f'{workdir}: a process failed:\n{err[-3000:]}')
    logs.append(err)
  metrics = json.loads((workdir / 'metrics.json').read_text())
  held = [re.search(r'input held at most (.*); peak memory ([\d,]+) MiB', e).groups() for e in logs]
  sums = [m.group(1) for e in logs if (m := re.search(r'has checksum (\w+)', e))]
  return {'metrics': metrics, 'held': held, 'checksums': sums, 'state': _latest_state(workdir)}


def _latest_state(workdir: pathlib.Path):
  from wsabie_jax.api import run
  return [np.asarray(x) for x in jax.tree.leaves(run.Restored(workdir).latest_state())]


def _largest_difference(a: list, b: list) -> float:
  worst = 0.0
  for x, y in zip(a, b):
    if np.issubdtype(x.dtype, np.floating) and x.size:
      scale = max(float(np.abs(y).max()), 1e-30)
      worst = max(worst, float(np.abs(x - y).max()) / scale)
    elif not np.array_equal(x, y):
      return float('inf')
  return worst


def _peer_death(args, workdir: pathlib.Path) -> str:
  procs = _start([*args, f'--workdir={workdir}'], _PROCESSES.value)
  try:
    saved = lambda: [p for p in (workdir / 'checkpoints').glob('*') if p.name.isdigit()]
    while not saved():  # (a step's folder is named by its number once written whole)
      if any(p.poll() is not None for p in procs):
        return 'the run ended before its first checkpoint: give it more steps'
      time.sleep(0.02)
    procs[-1].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    lines = []
    for p in procs[:-1]:
      _, err = p.communicate(timeout=10 * _HEARTBEAT.value + 60)
      lines.append(f'exit status {p.returncode}, "{err.strip().splitlines()[-1]}"')
    return f'{time.monotonic() - killed:.1f} s; ' + '; '.join(lines)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.communicate()


def main(argv):
  logging.set_verbosity(logging.WARNING)  # (Orbax's restores are chatty)
  args = argv[1:]
  root = pathlib.Path(_WORKDIR.value)
  root.mkdir(parents=True, exist_ok=True)
  n, d = _PROCESSES.value, _DEVICES.value
  runs = {f'1 process x {d} devices': _run(args, root / 'one', 1),
          f'{n} processes x {d // n} devices': _run(args, root / 'several', n)}
  print(f'{"run":<26} {"test p@1":>9} {"test MAP":>9} {"steps":>6} {"pairs/s":>9}  '
        'input held at most, a process; peak memory')
  for name, r in runs.items():
    m = r['metrics']
    held = '; '.join(f'{h} ({rss} MiB)' for h, rss in r['held'])
    print(f'{name:<26} {m["p@1"]:>9.4f} {m["map"]:>9.4f} {m["steps"]:>6} '
          f'{m["train_examples_per_sec"]:>9,.0f}  {held}')
  one, several = runs.values()
  same = cluster.same_metrics(one['metrics'], several['metrics'])
  print(f'final states: largest difference {_largest_difference(several["state"], one["state"]):.2e}'
        f' (relative to each array\'s largest value); test metrics '
        f'{"identical" if same else "DIFFER"}; the {n} processes\' replicas '
        f'{"identical" if len(set(several["checksums"])) == 1 else "DIFFER"} '
        f'(checksums {", ".join(several["checksums"])})')
  if _PEER_DEATH.value:
    print(f'peer death (the last process killed after the first checkpoint, heartbeat timeout '
          f'{_HEARTBEAT.value} s): the others exited after {_peer_death(args, root / "death")}')


if __name__ == '__main__':
  cli.main(main)

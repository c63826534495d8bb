"""Kills training with SIGKILL at chosen moments, resumes it, and checks the
result equals an uninterrupted run's: test metrics and the best state, bit for bit.

  python launch/kill_resume.py --workdir=/tmp/kills [--kill_at=0.2,0.5,0.9 --repeat_kills=3]

The uninterrupted run is timed first (T seconds, start-up included). Each
value f of --kill_at is one scenario: start launch/train.py, SIGKILL it f·T
seconds after it starts — spread over the run, the kills land before the first
checkpoint, between and during saves, in the final evaluation — then run it
again to the end. --repeat_kills adds a scenario killed that many times (each
restart killed at 0.3·T, 0.45·T, … of its own start). Prints one line per
scenario and exits non-zero if any differs.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

from absl import flags

import numpy as np
import jax
from wsabie_jax.api import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
_CONFIG = flags.DEFINE_string('config', 'configs/wsabie_synthetic.py:small', 'Config to train.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Scratch folder for the runs.', required=True)
_KILL_AT = flags.DEFINE_list('kill_at', ['0.15', '0.3', '0.45', '0.6', '0.75', '0.9'],
                             'When to SIGKILL, as fractions of the uninterrupted run\'s time.')
_REPEAT = flags.DEFINE_integer('repeat_kills', 3, 'A scenario killed this many times (0: none).')
_OVERRIDES = flags.DEFINE_list('overrides', ['train.num_epochs=150', 'train.eval_every_steps=50',
                                             'train.checkpoint_every_steps=50',
                                             'train.patience=100'], 'Config overrides.')
TIMES = {'train_seconds', 'train_examples_per_sec'}


def _command(workdir):
  return [sys.executable, 'launch/train.py', f'--config={_CONFIG.value}', f'--workdir={workdir}',
          *[f'--config.{o}' for o in _OVERRIDES.value]]


def _killed_at(workdir, seconds: float) -> bool:
  """Starts a run and SIGKILLs it after `seconds`; False if it ended first."""
  proc = subprocess.Popen(_command(workdir), cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  try:
    proc.wait(timeout=seconds)
    return False
  except subprocess.TimeoutExpired:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _finish(workdir) -> str:
  """Runs to the end; where it resumed from (the last kill's checkpoint)."""
  out = subprocess.run(_command(workdir), cwd=ROOT, capture_output=True, text=True)
  if out.returncode:
    raise SystemExit(f'{workdir}: the resumed run failed:\n{out.stderr[-2000:]}')
  found = re.search(r'resumed from step (\d+)', out.stderr)
  return f'step {found.group(1)}' if found else 'scratch'


def _result(workdir):
  from wsabie_jax.api import run
  metrics = json.loads((pathlib.Path(workdir) / 'metrics.json').read_text())
  state = run.Restored(workdir).state
  return ({k: v for k, v in metrics.items() if k not in TIMES},
          [np.asarray(x) for x in jax.tree.leaves(state)])


def main(argv):
  del argv
  root = pathlib.Path(_WORKDIR.value)
  root.mkdir(parents=True, exist_ok=True)
  t0 = time.perf_counter()
  _finish(root / 'straight')
  total = time.perf_counter() - t0
  print(f'uninterrupted run: {total:.1f} s')
  want_metrics, want_state = _result(root / 'straight')
  scenarios = [[round(float(f) * total, 1)] for f in _KILL_AT.value]
  if _REPEAT.value:
    scenarios.append([round((0.3 + 0.15 * i) * total, 1) for i in range(_REPEAT.value)])
  failed = 0
  for i, kills in enumerate(scenarios):
    workdir = root / f'killed{i}'
    done = [t for t in kills if _killed_at(workdir, t)]
    resumed = _finish(workdir)
    got_metrics, got_state = _result(workdir)
    same_metrics = got_metrics == want_metrics
    same_state = all(np.array_equal(a, b) for a, b in zip(want_state, got_state))
    failed += not (same_metrics and same_state)
    print(f'killed after {kills} s ({len(done)} landed, resumed from {resumed}): metrics '
          f'{"identical" if same_metrics else "DIFFER"}, best state '
          f'{"bit-identical" if same_state else "DIFFERS"}; p@1 {got_metrics["p@1"]:.4f}, '
          f'steps {got_metrics["steps"]}')
  if failed:
    raise SystemExit(f'{failed} scenario(s) differ')


if __name__ == '__main__':
  cli.main(main)

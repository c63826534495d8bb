"""Several training processes on this machine, as several hosts would run them.

  python launch/local_cluster.py --num_processes=2 --devices_per_process=2 -- \
      --config=configs/wsabie_synthetic.py:small --workdir=/tmp/run --config.train.num_devices=4

Starts `--script` (launch/train.py) once per process with the arguments after
`--`, each on its own CPU devices (XLA_FLAGS forces `--devices_per_process` of
them) and joined through jax.distributed on a free 127.0.0.1 port: the same
program a TPU pod slice or a SLURM job runs, so a multi-host config can be
checked on a laptop before paying for a pod (docs/MULTIHOST.md). Each output
line is prefixed with its process ([p0], [p1], ...). When a process fails, the
others are given `--grace_seconds` to stop on their own (they do, with a
one-line error, within their --heartbeat_timeout) and are killed after that.
Ctrl-C, SIGTERM or SIGHUP to it is passed on to every process once: each
saves and stops as a single run does. Exits with the first non-zero status,
else 0.
"""
from __future__ import annotations

from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)

import pathlib
import sys

from absl import app, flags

from wsabie_jax.api.local_cluster import commands, environment, free_port, run_cluster
from wsabie_jax.api import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
_NUM = flags.DEFINE_integer('num_processes', 2, 'Processes to start (hosts to stand in for).')
_DEVICES = flags.DEFINE_integer('devices_per_process', 2, 'CPU devices each process sees.')
_SCRIPT = flags.DEFINE_string('script', 'launch/train.py', 'The program each process runs.')
_GRACE = flags.DEFINE_float('grace_seconds', 60.0, 'After a process fails, how long the others '
                            'may take to stop by themselves before they are killed.')


def main(argv):
  args = argv[1:]
  if not args:
    raise app.UsageError('give the training arguments after --, e.g. -- '
                         '--config=configs/wsabie_synthetic.py:small --workdir=/tmp/run')
  if _NUM.value < 1:
    raise app.UsageError(f'--num_processes={_NUM.value}: start at least 1')
  script = ROOT / _SCRIPT.value
  if not script.is_file():
    raise app.UsageError(f'--script={_SCRIPT.value}: no such file')
  cmds = commands(str(script), args, _NUM.value, free_port())
  sys.exit(run_cluster(cmds, environment(_DEVICES.value), _GRACE.value))


if __name__ == '__main__':
  cli.main(main)

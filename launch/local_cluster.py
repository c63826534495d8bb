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
Exits with the first non-zero status, else 0.
"""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

from absl import app, flags

ROOT = pathlib.Path(__file__).resolve().parents[1]
_NUM = flags.DEFINE_integer('num_processes', 2, 'Processes to start (hosts to stand in for).')
_DEVICES = flags.DEFINE_integer('devices_per_process', 2, 'CPU devices each process sees.')
_SCRIPT = flags.DEFINE_string('script', 'launch/train.py', 'The program each process runs.')
_GRACE = flags.DEFINE_float('grace_seconds', 60.0, 'After a process fails, how long the others '
                            'may take to stop by themselves before they are killed.')


def free_port() -> int:
  """A TCP port free on 127.0.0.1 now (the coordinator binds it moments later)."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def commands(script: str, args: list[str], num_processes: int, port: int) -> list[list[str]]:
  """One command line a process: `script args` and its place in the cluster."""
  return [[sys.executable, script, *args, f'--coordinator_address=127.0.0.1:{port}',
           f'--num_processes={num_processes}', f'--process_id={i}'] for i in range(num_processes)]


def environment(devices_per_process: int) -> dict:
  """The processes' environment: CPUs only, `devices_per_process` devices each."""
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONUNBUFFERED='1')
  flags_ = [f for f in env.get('XLA_FLAGS', '').split()
            if not f.startswith('--xla_force_host_platform_device_count')]
  env['XLA_FLAGS'] = ' '.join(flags_ + [f'--xla_force_host_platform_device_count='
                                        f'{devices_per_process}'])
  return env


def _relay(i: int, stream, out):
  for line in iter(stream.readline, ''):
    out.write(f'[p{i}] {line}')
    out.flush()


def run_cluster(cmds: list[list[str]], env: dict, grace_seconds: float, cwd=ROOT) -> int:
  """Runs the commands side by side; the first non-zero exit status, else 0.
  After one fails, the rest get `grace_seconds` to end, then SIGKILL."""
  procs = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True) for c in cmds]
  relays = [threading.Thread(target=_relay, args=(i, p.stdout, sys.stdout), daemon=True)
            for i, p in enumerate(procs)]
  for t in relays:
    t.start()
  status, deadline = 0, None
  try:
    while any(p.poll() is None for p in procs):
      failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
      if failed and deadline is None:
        status, deadline = failed[0], time.monotonic() + grace_seconds
      if deadline is not None and time.monotonic() > deadline:
        for i, p in enumerate(procs):
          if p.poll() is None:
            print(f'[local_cluster] process {i} still running {grace_seconds:.0f} s after a '
                  'peer failed: killing it', flush=True)
            p.send_signal(signal.SIGKILL)
      time.sleep(0.1)
  finally:
    for p in procs:  # Ctrl-C (or an error here) takes the cluster down with it
      if p.poll() is None:
        p.kill()
      p.wait()
    for t in relays:
      t.join(timeout=5)
  return status or next((p.returncode for p in procs if p.returncode), 0)


def main(argv):
  args = argv[1:]
  if not args:
    raise app.UsageError('give the training arguments after --, e.g. -- '
                         '--config=configs/wsabie_synthetic.py:small --workdir=/tmp/run')
  cmds = commands(_SCRIPT.value, args, _NUM.value, free_port())
  sys.exit(run_cluster(cmds, environment(_DEVICES.value), _GRACE.value))


if __name__ == '__main__':
  app.run(main)

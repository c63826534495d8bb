"""Several processes on this machine, as several hosts would run them: the
commands, their environment and a supervisor (launch/local_cluster.py's
library; tests/multihost_test.py and launch/compare_hosts.py use it too).

Each process gets its own CPU devices (XLA_FLAGS forces the count) and joins
the others through jax.distributed on a free 127.0.0.1 port.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time


def same_metrics(a: dict, b: dict) -> bool:
  """Whether two runs' metrics.json are equal, timings left out (the steps'
  seconds, the wait for input, pairs/s: the clock's, not the run's)."""
  strip = lambda m: {k: v for k, v in m.items() if not k.endswith(('_seconds', '_per_sec'))}
  return strip(a) == strip(b)


def free_port() -> int:
  """A TCP port free on 127.0.0.1 now (the coordinator binds it moments later)."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def commands(script: str, args: list[str], num_processes: int, port: int) -> list[list[str]]:
  """One command line a process: `script args` and its place in the cluster."""
  return [[sys.executable, script, *args, f'--coordinator_address=127.0.0.1:{port}',
           f'--num_processes={num_processes}', f'--process_id={i}'] for i in range(num_processes)]


def flags_but_device_count(xla_flags: str) -> list[str]:
  """XLA_FLAGS' flags, the forced count of CPU devices left out."""
  return [f for f in xla_flags.split() if not f.startswith('--xla_force_host_platform_device_count')]


def environment(devices_per_process: int) -> dict:
  """The processes' environment: CPUs only, `devices_per_process` devices each."""
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONUNBUFFERED='1')
  env['XLA_FLAGS'] = ' '.join(flags_but_device_count(env.get('XLA_FLAGS', '')) +
                              [f'--xla_force_host_platform_device_count={devices_per_process}'])
  return env


def _relay(i: int, stream, out):
  for line in iter(stream.readline, ''):
    out.write(f'[p{i}] {line}')
    out.flush()


# Signals the supervisor passes on to every process it started, once each: the
# processes run in sessions of their own, so Ctrl-C at the terminal reaches
# them only through it (twice would be a second Ctrl-C: stop without saving).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# Each process starts through this shim: Linux is asked to SIGTERM it (save
# and stop) when the supervisor dies, even by SIGKILL (PR_SET_PDEATHSIG, kept
# across the exec that follows; elsewhere nothing), then it becomes the
# command. Not a preexec_fn: that runs Python in the forked child of a
# supervisor that may hold threads (JAX's, in a notebook or a test), which can
# deadlock there, and JAX warns of it at every fork.
_DIE_WITH_PARENT = """
import ctypes, os, signal, sys
try:
  ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
except (OSError, AttributeError):
  pass
if os.getppid() != int(sys.argv[1]):  # the supervisor died before the prctl
  sys.exit(128 + signal.SIGTERM)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def dying_with_this_process(cmd: list[str]) -> list[str]:
  """`cmd` started through the shim above: SIGTERM when this process dies."""
  return [sys.executable, '-c', _DIE_WITH_PARENT, str(os.getpid()), *cmd]


def run_cluster(cmds: list[list[str]], env: dict, grace_seconds: float, cwd=None) -> int:
  """Runs the commands side by side; the first non-zero exit status, else 0.
  After one fails, the rest get `grace_seconds` to end, then SIGKILL. A
  SIGINT, SIGTERM or SIGHUP to the supervisor is passed to every process,
  which saves and stops; they get `grace_seconds` to do so."""
  procs = [subprocess.Popen(dying_with_this_process(c), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
           for c in cmds]
  relays = [threading.Thread(target=_relay, args=(i, p.stdout, sys.stdout), daemon=True)
            for i, p in enumerate(procs)]
  for t in relays:
    t.start()
  status, deadline = 0, None

  def forward(signum, frame):
    nonlocal deadline
    del frame
    print(f'[local_cluster] {signal.Signals(signum).name}: passed to every process', flush=True)
    for p in procs:
      if p.poll() is None:
        p.send_signal(signum)
    deadline = deadline or time.monotonic() + grace_seconds

  on_main = threading.current_thread() is threading.main_thread()
  previous = {s: signal.signal(s, forward) for s in FORWARDED} if on_main else {}
  try:
    while any(p.poll() is None for p in procs):
      failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
      if failed and deadline is None:
        status, deadline = failed[0], time.monotonic() + grace_seconds
      if deadline is not None and time.monotonic() > deadline:
        for i, p in enumerate(procs):
          if p.poll() is None:
            print(f'[local_cluster] process {i} still running {grace_seconds:.0f} s after a '
                  'peer failed or a signal: killing it', flush=True)
            p.send_signal(signal.SIGKILL)
      time.sleep(0.1)
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    for p in procs:  # an error here takes the cluster down with it
      if p.poll() is None:
        p.kill()
      p.wait()
    for t in relays:
      t.join(timeout=5)
    for p, t in zip(procs, relays):
      if not t.is_alive():  # (one still reading keeps its pipe: a child's child holds it)
        p.stdout.close()
  return status or next((p.returncode for p in procs if p.returncode), 0)

"""last_word.py: the one line in place of JAX's abort report when process 0 dies."""
import os
import pathlib
import random
import re
import subprocess
import sys
import textwrap

from wsabie_jax.training import last_word

ROOT = pathlib.Path(__file__).resolve().parents[1]

# As process 1 printed it when process 0 was SIGKILLed (jaxlib 0.10.2; the
# native stack and faulthandler's dump shortened).
REPORT = (
    b'W1128 12:25:38.114472   16399 preemption_sync_manager.cc:147] Failed to retrieve '
    b'preemption notice from coordination service: UNAVAILABLE: Socket closed\n'
    b':UNKNOWN:Error received from peer  {grpc_message:"Socket closed", grpc_status:14}.\n'
    b'E1128 12:25:38.114715   16399 preemption_sync_manager.cc:159] Failed to cancel '
    b'preemption barrier: FAILED_PRECONDITION\n'
    b'E1128 12:25:38.114872   16399 coordination_service_agent.cc:289] Polled an error from '
    b'coordination service (this can be an error from this or another task).\n'
    b'F1128 12:25:38.114925   16399 client.h:80] Terminating process because the JAX '
    b'distributed service detected fatal errors. This most likely indicates that another '
    b'task died\n'
    b'*** Check failure stack trace: ***\n'
    b'    @     0x7f6636240634  absl::log_internal::LogMessage::SendToLog()\n'
    b'Fatal Python error: Aborted\n\n'
    b'Thread 0x00007f7a163fa6c0 (most recent call first):\n'
    b'  File "wsabie_jax/training/hosts.py", line 317 in beat\n')
BEFORE = (b'step 560/\xe2\x89\xa45,040 [##....]  11% 11,339 ex/s\n'
          b'I1128 12:25:36.262590 1400771 checkpoints.py:99] saved checkpoint checkpoints/500\n'
          b'\rstep 564')


def _feed_in_pieces(filt, data: bytes, seed: int) -> bytes:
  rng, out, at = random.Random(seed), [], 0
  while at < len(data):
    step = rng.randint(1, 40)
    out.append(filt.feed(data[at:at + step]))
    at += step
  return b''.join(out)


def test_output_passes_as_it_comes_and_records_are_taken_out():
  filt = last_word.Filter()
  assert filt.feed(b'\rstep 3 [#..') == b'\rstep 3 [#..'  # a bar's partial line: at once
  assert filt.feed(b'.]\n\x1ewsabie:step 48\nnext\x1ewsab') == b'.]\nnext'
  assert filt.feed(b'ie:checkpoints /w/checkpoints\n') == b''
  assert filt.where == {'step': '48', 'checkpoints': '/w/checkpoints'}
  other = b'E1128 12:00:00.000000 1 x.cc:1] some other error\n'
  assert filt.feed(other[:20]) == b'' and filt.feed(other[20:]) == other  # shown once whole
  assert filt.end() == b''


def test_the_runtimes_abort_report_becomes_one_line(tmp_path):
  """Cut anywhere (seeded): what came before is shown as it was; the report
  is kept in a file, and one line names the cause, the step and the last
  checkpoint in its place."""
  (tmp_path / 'checkpoints' / '500').mkdir(parents=True)
  (tmp_path / 'checkpoints' / '600.orbax-checkpoint-tmp').mkdir()
  records = (f'\x1ewsabie:checkpoints {tmp_path / "checkpoints"}\n'
             '\x1ewsabie:step 564\n').encode()
  for seed in range(20):
    filt = last_word.Filter(report_dir=str(tmp_path))
    shown = _feed_in_pieces(filt, BEFORE[:40] + records + BEFORE[40:] + REPORT, seed)
    assert shown == BEFORE, seed
    line = filt.end().decode()
    match = re.fullmatch(r"error: process 0 \(the coordinator\) stopped answering at step 564; "
                         r"the last checkpoint is step 500; restart every process to resume "
                         r"\(the runtime's report: (\S+)\)\n", line)
    assert match, line
    assert pathlib.Path(match.group(1)).read_bytes() == REPORT


def test_a_report_that_stops_nothing_is_shown_after_all():
  """A polled error with no fatal line within 20 lines, or at the end, is shown."""
  polled = REPORT.split(b'F1128')[0]
  filt = last_word.Filter()
  lines = b''.join(b'line %d\n' % i for i in range(25))
  assert filt.feed(polled) == b''
  assert filt.feed(lines) == polled + lines
  filt = last_word.Filter()
  assert filt.feed(polled) == b'' and filt.end() == polled


def test_an_aborting_process_ends_with_the_line(tmp_path):
  """Installed in a real process that then aborts (SIGABRT, as the runtime
  does): its stderr ends with the one line, the report in a file."""
  code = textwrap.dedent(f'''
      import os, tempfile
      tempfile.tempdir = {str(tmp_path)!r}
      from wsabie_jax.training import last_word
      last_word.install()
      print('training', file=__import__('sys').stderr, flush=True)
      last_word.tell('step', 7)
      os.write(2, {REPORT!r})
      os.abort()
  ''')
  done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                        timeout=60, env={**os.environ, 'TMPDIR': str(tmp_path)})
  assert done.returncode == -6
  lines = done.stderr.decode().splitlines()
  assert lines[0] == 'training'
  assert re.fullmatch(r"error: process 0 \(the coordinator\) stopped answering at step 7; no "
                      r"checkpoint was saved yet; restart every process to resume \(the "
                      r"runtime's report: \S+\)", lines[-1]), lines
  assert len(lines) == 2, lines

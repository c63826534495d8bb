"""Every entry point answers a user's error in one line and a non-zero exit
(issue 38): a wrong workdir for each launch script, a bad flag and a missing
flag file through the parser they share (cli.main); config files that fail
to load; Ctrl-C while training."""
import ast
import concurrent.futures
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import types

import pytest

from wsabie_jax.api import cli
from wsabie_jax.core import echoes, signal_notes
from wsabie_jax.training import interrupts

from tests import helpers

pytestmark = pytest.mark.slow  # launch scripts in subprocesses

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / 'launch').glob('*.py'))


def _env(optimized: bool = False) -> dict:
  """One device, as a user's laptop; `optimized`: XLA's optimisations on (a run whose time is steps)."""
  return helpers.one_device_env(**(helpers.OPTIMIZED_ENV if optimized else {}))


def _cli(*args, timeout=120, cwd=ROOT, optimized=False):
  return subprocess.run([sys.executable, *args], cwd=cwd, env=_env(optimized),
                        capture_output=True, text=True, timeout=timeout)


def _wrong_place(script: str, a_file: pathlib.Path) -> list[str]:
  """Arguments that point the script's workdir (or output) at an existing file."""
  if script == 'make_shards.py':
    return ['--config=configs/wsabie_webscale.py:small',
            f'--config.data.shards_dir={a_file}/shards']
  if script == 'featurize.py':
    return [f'--images={a_file.parent}', f'--tags={a_file}', f'--out={a_file}/out']
  if script == 'benchmark.py':
    return ['--suite=checkpoints', '--small', f'--out={a_file}/out.json']
  if script == 'openclipart_tags.py':
    return [f'--svg_dir={a_file.parent}', f'--png_dir={a_file.parent}', f'--out={a_file}/tags.tsv']
  if script == 'local_cluster.py':
    return [f'--script={a_file}/train.py', '--', '--workdir=x']
  extra = {'annotate.py': ['--input=x.txt'], 'reproduce.py': ['--table=000-4', '--small'],
           'train.py': ['--config=configs/wsabie_synthetic.py:small'],
           'compare_samplers.py': ['--small'], 'compare_parts.py': ['--small'],
           'compare_skipgram.py': ['--small'], 'baselines.py': ['--small']}
  return [f'--workdir={a_file}'] + extra.get(script, [])


def test_every_launch_script_answers_bad_input_in_one_line(tmp_path):
  """Not absl's two-line flag error, nor a 19–70-line traceback for a missing
  file or a workdir that is a file, nor an AttributeError from make_shards. A wrong
  workdir is each script's own check; flags are parsed by cli.main, which
  every script runs (test_every_launch_script_runs_through_cli_main), so a
  bad flag and a missing flag file are tried on two."""
  a_file = tmp_path / 'a_file'
  a_file.write_text('not a folder\n')
  cases = [(script, 'wrong workdir', _wrong_place(script, a_file)) for script in SCRIPTS]
  for script in ('train.py', 'benchmark.py'):
    cases.append((script, 'bad flag', ['--no_such_flag=1']))
    cases.append((script, 'missing file', [f'--flagfile={tmp_path}/no/such/flags.txt']))
  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    outs = list(pool.map(lambda c: _cli(f'launch/{c[0]}', *c[2]), cases))
  bad = []
  for (script, case, args), out in zip(cases, outs):
    lines = out.stderr.strip().splitlines()
    if out.returncode == 0 or len(lines) != 1 or not lines[0].startswith('error: ') \
        or len(lines[0]) > 400:
      bad.append(f'{script} ({case}, {args}): exit {out.returncode}, stderr '
                 f'{out.stderr.strip()[-600:]!r}')
  assert not bad, '\n'.join(bad)


def test_every_launch_script_runs_through_cli_main():
  """Each script's last statement is `if __name__ == '__main__': cli.main(main)`
  (absl's app.run answers a bad flag in two lines and a traceback)."""
  wrong = []
  for script in SCRIPTS:
    last = ast.parse((ROOT / 'launch' / script).read_text()).body[-1]
    if not (isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'"
            and [ast.unparse(s) for s in last.body] == ['cli.main(main)']):
      wrong.append(script)
  assert not wrong, f'not run by cli.main: {wrong}'


@pytest.mark.parametrize('body,arg,says', [
    ('from wsabie_jax.data import DataError\n\n\ndef get_config():\n'
     '  raise DataError("x.txt", 3, "bad")\n', '', 'x.txt, line 3: bad'),
    ('def get_config(:\n', '', 'syntax error'),
    ('X = 1\n', '', "has no attribute 'get_config'"),
    ('raise ValueError("boom")\n', '', 'boom'),
])
def test_config_files_that_fail_to_load_are_one_line(tmp_path, body, arg, says):
  """A DataError raised while the config loads (the README's own command
  form, no overrides) is its own line, not "FATAL Flags parsing error: …
  DataError.__init__() missing 2 required positional arguments"; a syntax
  error, no get_config or a raising config file, not a 20–57-line traceback."""
  path = 'configs/wsabie_mulan.py'
  if body is not None:
    path = tmp_path / 'my_config.py'
    path.write_text(body)
  out = _cli('launch/train.py', f'--config={path}{arg}', f'--workdir={tmp_path / "run"}')
  lines = out.stderr.strip().splitlines()
  assert out.returncode == 1 and len(lines) == 1 and lines[0].startswith('error: --config='), \
      out.stderr[-2000:]
  assert says in lines[0]
  assert not (tmp_path / 'run').exists()


def test_missing_data_is_one_error_line_when_the_run_starts(tmp_path):
  """Loading the Mulan config reads no data (its 'auto' fields are fitted when
  the run starts): a missing folder is the run's one-line error, no workdir."""
  out = _cli('launch/train.py', '--config=configs/wsabie_mulan.py:libsvm,/no/such/dir',
             f'--workdir={tmp_path / "run"}')
  assert out.returncode == 1 and out.stderr.strip().splitlines() == [
      f'training wsabie in {tmp_path / "run"} (reading the data; a first run on this machine '
      'compiles)',  # (what it was doing, then what failed)
      'error: /no/such/dir/train.txt: file not found (set config.data paths)'], out.stderr[-2000:]
  assert not (tmp_path / 'run').exists()


def test_a_missing_config_file_is_one_line(tmp_path):
  out = _cli('launch/train.py', '--config=configs/no_such.py', f'--workdir={tmp_path / "run"}')
  assert out.returncode == 1 and out.stderr.strip().splitlines() == [
      "error: --config=configs/no_such.py: 'configs/no_such.py': expected a config file "
      'configs/FILE.py[:ARG]']


def _train_args(workdir):
  return ['launch/train.py', '--config=configs/wsabie_synthetic.py:small', f'--workdir={workdir}',
          '--config.train.max_steps=3000', '--config.train.max_seconds=0',
          '--config.train.evals_per_budget=0', '--config.train.eval_every_steps=500',
          '--config.train.checkpoint_every_steps=1000', '--config.train.patience=100',
          ]


def test_ctrl_c_saves_and_the_rerun_ends_as_an_uninterrupted_run(tmp_path):
  """Not a 50-line KeyboardInterrupt with up to a checkpoint interval of work
  lost: SIGINT once the first validation is logged: exit 130 with one line
  naming the step it saved; the same command again ends where a run never
  interrupted ends (the same test metrics)."""
  whole = _cli(*_train_args(tmp_path / 'whole'), timeout=300, optimized=True)
  assert whole.returncode == 0, whole.stderr[-2000:]
  proc = subprocess.Popen([sys.executable, *_train_args(tmp_path / 'cut')], cwd=ROOT,
                          env=_env(optimized=True),
                          stderr=subprocess.PIPE, text=True)
  lines = []
  deadline = time.monotonic() + 240
  for line in proc.stderr:  # the first validation: training is under way
    lines.append(line)
    if re.search(r'step \d+: valid', line) or time.monotonic() > deadline:
      break
  proc.send_signal(signal.SIGINT)
  rest = proc.stderr.read()
  assert proc.wait(timeout=120) == 130, ''.join(lines) + rest
  last = rest.strip().splitlines()[-1]
  assert last.startswith('Ctrl-C (SIGINT) at step ') and 'rerun the same command' in last, rest
  step = int(last.split('at step ')[1].split(';')[0])
  assert step < 3000 and (tmp_path / 'cut/checkpoints' / str(step)).is_dir()
  again = _cli(*_train_args(tmp_path / 'cut'), timeout=300, optimized=True)
  assert again.returncode == 0, again.stderr[-2000:]
  assert f'resumed from step {step}' in again.stderr
  metrics = [json.loads((tmp_path / d / 'metrics.json').read_text()) for d in ('whole', 'cut')]
  for key in ('p@1', 'map', 'steps', 'best_step'):
    assert metrics[0][key] == metrics[1][key], key


def test_sighup_saves_as_sigterm_does(tmp_path):
  """SIGHUP (a closed terminal, a scheduler's hang-up) gets the save SIGTERM
  gets, not a kill."""
  proc = subprocess.Popen([sys.executable, *_train_args(tmp_path / 'run')], cwd=ROOT,
                          env=_env(optimized=True), stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + 240
  for line in proc.stderr:
    if re.search(r'step \d+: valid', line) or time.monotonic() > deadline:
      break
  proc.send_signal(signal.SIGHUP)
  rest = proc.stderr.read()
  assert proc.wait(timeout=120) == 128 + signal.SIGHUP, rest
  last = rest.strip().splitlines()[-1]
  assert last.startswith('SIGHUP (hang-up: a closed terminal or a scheduler) at step '), rest
  step = int(last.split('at step ')[1].split(';')[0])
  assert (tmp_path / 'run/checkpoints' / str(step)).is_dir()


def test_ctrl_c_cancels_a_timer_a_library_left_waiting():
  """A Ctrl-C inside JAX's backend start-up left its 60-s warning timer
  running (started before the try that cancels it): the exit waited for it
  and printed the warning after the one line. The line's handler cancels it."""
  import threading
  fired = []
  timer = threading.Timer(60.0, lambda: fired.append(True))
  timer.start()
  with pytest.raises(SystemExit) as exit_:
    with cli.one_line_errors():
      raise KeyboardInterrupt
  assert exit_.value.code == 128 + signal.SIGINT
  timer.join(timeout=30.0)  # (a bound, not a speed: a cancelled timer ends at once)
  assert not timer.is_alive() and not fired


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize('after', [0.3, 1.5])
def test_a_signal_while_starting_is_one_line(tmp_path, signum, after):
  """SIGINT 0.3–2.6 s after the start: one line, not a 6–37-line traceback from
  inside an import, and never swallowed (a run trained to the end)."""
  proc = subprocess.Popen([sys.executable, *_train_args(tmp_path / 'run')], cwd=ROOT, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  time.sleep(after)
  proc.send_signal(signum)
  out, err = proc.communicate(timeout=120)
  lines = err.strip().splitlines()
  assert proc.returncode == 128 + signum, err[-3000:]
  # Where the signal lands is the machine's speed: still starting, past
  # start-up's log lines (an error line naming the signal), or training (the
  # save's line).
  said = lines[-1]
  assert said.startswith('error: ') and signal.Signals(signum).name in said or \
      said.startswith(f'{interrupts.NAMES[signum]} at step '), err[-3000:]
  assert all(line.startswith(('training ', 'I1', 'W1', 'step ')) for line in lines[:-1]), err
  assert 'Traceback' not in err


def test_a_signal_swallowed_in_a_callback_prints_nothing_there(monkeypatch):
  """A signal that lands in JAX's gc callback prints no 'Exception ignored
  in: <function _xla_gc_callback>' with a 6-line traceback (it is noted, and
  the run still stops: interrupts.caught). Other unraisable errors, and a
  KeyboardInterrupt no signal explains, reach the hook that was there."""
  shown = []
  monkeypatch.setitem(echoes._HOOKS, 'before', shown.append)
  monkeypatch.setattr(echoes, '_ECHOES', [signal_notes._swallowed_signal])
  monkeypatch.setattr(signal_notes, 'received', [signal.SIGINT])
  swallowed, other = (types.SimpleNamespace(exc_type=t) for t in (KeyboardInterrupt, ValueError))
  echoes._hook(swallowed)
  echoes._hook(other)
  assert shown == [other]
  monkeypatch.setattr(signal_notes, 'received', [])
  echoes._hook(swallowed)
  assert shown == [other, swallowed]


def test_evaluate_prints_its_metrics_before_it_writes_them(tmp_path):
  """A workdir it cannot write still gets the metrics printed, before
  eval_test.json fails to be written. And a reader that has gone
  ends it quietly."""
  workdir = tmp_path / 'run'
  out = _cli('launch/train.py', '--config=configs/wsabie_synthetic.py:small',
             f'--workdir={workdir}', '--config.train.max_steps=200', timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stderr.splitlines()[0] == (f'training wsabie in {workdir} (reading the data; a first '
                                        'run on this machine compiles)')  # (what it is doing)
  (workdir / 'eval_test.json').mkdir()  # unwritable, even for root
  out = _cli('launch/evaluate.py', f'--workdir={workdir}')
  assert out.returncode == 1 and out.stdout.startswith('test p@1 ')
  assert out.stderr.strip().splitlines() == [
      f'evaluating {workdir} on its test split (reading the run and its data; a first run on '
      'this machine compiles)',
      f'error: {workdir}/eval_test.json: Is a directory; a folder, not a file']
  # Its reader gone before it prints (`evaluate --json | head -2`): quiet, 141
  # (was an 18-line BrokenPipeError traceback).
  proc = subprocess.Popen([sys.executable, 'launch/evaluate.py', f'--workdir={workdir}',
                           '--json', '--split=valid'], cwd=ROOT, env=_env(False),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  proc.stdout.close()
  stderr = proc.communicate(timeout=120)[1]
  assert proc.returncode == 141 and 'Traceback' not in stderr, stderr
  assert stderr.strip().splitlines() == [
      f'evaluating {workdir} on its valid split (reading the run and its data; a first run on '
      'this machine compiles)']


def test_make_shards_of_a_config_without_shards_is_one_line():
  """Not an AttributeError traceback."""
  out = _cli('launch/make_shards.py', '--config=configs/wsabie_synthetic.py:small')
  assert out.returncode == 1 and out.stderr.strip().splitlines() == [
      "error: config.data.kind='synthetic': make_shards writes the shards of a config with "
      "data.kind='shards' (configs/wsabie_webscale.py)"]

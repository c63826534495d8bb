"""train.profile_calls: a profiler trace of the run's own calls (training/profile.py)."""
import gzip
import json
import logging

import jax
import pytest

from wsabie_jax.api import configs, run
from wsabie_jax.training import profile
from tests import helpers


def _events(workdir) -> list[dict]:
  """The trace's events, from its one Chrome-format file."""
  files = list((workdir / 'profile').rglob('*.trace.json.gz'))
  assert len(files) == 1, files
  return profile.trace_events(workdir / 'profile')


def _tiny(**train):
  """A run of 2 steps a call, 20 steps, 3 calls traced."""
  c = configs.load('wsabie_synthetic:small')
  c.data.num_train, c.data.num_test = 600, 100
  c.data.synthetic.update(num_labels=40, num_features=200)
  c.model.dim, c.train.batch_size = 8, 16
  with c.train.ignore_type():  # (num_epochs='auto')
    c.train.update(max_steps=20, steps_per_call=2, eval_subset=50, patience=100,
                   profile_calls=3, **train)
  return c


@pytest.mark.slow  # a whole (tiny) training through the loop
def test_the_calls_after_the_first_validation_are_traced_and_left_out_of_the_steps_time(
    tmp_path, monkeypatch, caplog):
  """The three calls of 2 steps each after the call that follows the first
  validation (step 4: steps 6-11) are the trace's 'train' steps, named by
  their first step, with the loop's input and the validation between them
  (step 8); starting and
  writing the trace count in the wall-clock budget, as a checkpoint does, but
  not in the steps' time (a fake clock that only they move), and the log says
  where the trace is and what it shows."""
  clock = helpers.FakeClock().install(monkeypatch)
  for name in ('start_trace', 'stop_trace'):
    real = getattr(jax.profiler, name)
    monkeypatch.setattr(jax.profiler, name,
                        lambda *a, real=real: (clock.advance(5.0), real(*a))[1])
  with caplog.at_level(logging.INFO, logger='wsabie_jax'):
    metrics = run.train_and_evaluate(_tiny(eval_every_steps=4), tmp_path)
  assert metrics['steps'] == 20
  record = json.loads((tmp_path / 'checkpoints' / '20' / 'record' / 'metadata').read_text())
  assert (metrics['train_seconds'], record['step_seconds']) == (10.0, 0.0)
  events = _events(tmp_path)
  steps = [e['args']['step_num'] for e in events if e.get('name') == 'train']
  assert steps == ['6', '8', '10'], steps
  names = [e.get('name') for e in events]
  assert names.count('input') >= 3 and names.count('validate') == 1, sorted(set(names))
  seen = profile.summary(tmp_path / 'profile')
  assert seen['calls'] == 3 and 0 < seen['device_busy'] <= 1, seen  # (XLA:CPU's runs)
  assert 0 < seen['input_ms'] < seen['dispatch_ms'] <= seen['window_ms'], seen
  assert (f'profile: steps 6-11 traced into {tmp_path / "profile"} (xprof --logdir, or '
          f'ui.perfetto.dev: the .trace.json.gz): 3 calls in {seen["window_ms"]:.1f} ms, the '
          f'device busy for {seen["device_busy"]:.2f} of it') in caplog.text


@pytest.mark.slow
def test_a_run_that_validates_only_at_its_end_is_traced_from_its_second_call(tmp_path):
  run.train_and_evaluate(_tiny(eval_every_steps=1000), tmp_path)
  steps = [e['args']['step_num'] for e in _events(tmp_path) if e.get('name') == 'train']
  assert steps == ['2', '4', '6'], steps


@pytest.mark.slow
def test_inside_a_trace_taken_from_outside_the_run_goes_on_and_names_its_calls(tmp_path, caplog):
  """JAX takes one trace at a time: the run's own is given up with a line,
  and the outside one (a notebook's `jax.profiler.trace`) holds every call
  by its first step."""
  with caplog.at_level(logging.WARNING, logger='wsabie_jax'):
    with jax.profiler.trace(str(tmp_path / 'outside')):
      metrics = run.train_and_evaluate(_tiny(eval_every_steps=4), tmp_path / 'run')
  assert metrics['steps'] == 20 and not (tmp_path / 'run' / 'profile').exists()
  assert 'train.profile_calls=3: no trace of its own, another is running' in caplog.text
  events = profile.trace_events(tmp_path / 'outside')
  steps = sorted(int(e['args']['step_num']) for e in events if e.get('name') == 'train')
  assert steps == list(range(0, 20, 2)), steps


def test_the_summary_reads_the_calls_and_the_devices_busy_time(tmp_path):
  """By hand: calls at 100 and 300 µs; the device runs 105-155 and 130-170
  (overlapping: 65 µs), 320-350 (30), and 50-70, before the first call (left
  out): busy 95 of the 250 µs from the first call to the device's last end.
  The host's own program runs (a CPU's device) do not count where a device is traced."""
  def span(pid, name, ts, dur):
    return {'ph': 'X', 'pid': pid, 'tid': 1, 'name': name, 'ts': ts, 'dur': dur}
  events = [{'ph': 'M', 'pid': 1, 'name': 'process_name', 'args': {'name': '/host:CPU'}},
            {'ph': 'M', 'pid': 2, 'name': 'process_name', 'args': {'name': '/device:GPU:0'}},
            span(1, 'train', 100, 10), span(1, 'input', 101, 2), span(1, 'train', 300, 10),
            span(1, 'input', 302, 4), span(2, 'fusion', 105, 50), span(2, 'gemm', 130, 40),
            span(2, 'fusion', 320, 30), span(2, 'fusion', 50, 20), span(1, 'validate', 200, 60),
            span(1, profile.CPU_PROGRAM, 200, 60)]
  folder = tmp_path / 'plugins' / 'profile' / 'a_run'
  folder.mkdir(parents=True)
  (folder / 'host.trace.json.gz').write_bytes(gzip.compress(json.dumps(
      {'traceEvents': events}).encode()))
  assert profile.summary(tmp_path) == {'calls': 2, 'window_ms': 0.25, 'dispatch_ms': 0.02,
                                       'input_ms': 0.006, 'device_busy': 95 / 250}


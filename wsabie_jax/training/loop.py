"""The training loop: steps, validation and early stopping, checkpoints, summaries.

Alg. 1's outer loop (paper 000 §3): repeat steps "until validation error does
not improve", evaluating on a validation subset every so often, keeping the
best checkpoint, and finally scoring the best one on the test split. The
method (what to train, how to validate and test it) comes in as plain data
(method.Method), built by `build(config, mesh)`; this module knows none.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import pathlib
import signal
import zlib
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax.core import metrics as metrics_lib
from wsabie_jax.training import (checkpoints, dispatch, hooks, hosts, identity, interrupts,
                                 parallel, profile, refit, resume, settings, setup,
                                 workdir as workdir_lib)
from wsabie_jax.training.method import Method
from wsabie_jax.training.recorder import (Clock, Recorder, RunRecord, Stop, Summaries,
                                          objects_frozen)

log = logging.getLogger('wsabie_jax')


class Diverged(RuntimeError):
  """Training produced non-finite values; the message names the step and the
  last good checkpoint (kept: nothing non-finite is ever saved)."""


def train_and_evaluate(config: ml_collections.ConfigDict, workdir,
                       build: Callable[[ml_collections.ConfigDict, object], Method],
                       force_new: bool = False, allow_data_change: bool = False) -> dict:
  """Trains (resuming from workdir), evaluates the best checkpoint, writes metrics.json.

  A run the locked workdir holds resumes only with the same config up to
  workdir.MAY_CHANGE and data (identity.py; `allow_data_change`: any data),
  checked before anything is written; `force_new` sets it aside. Several
  processes first agree on the run; process 0 alone writes the workdir.
  """
  workdir = workdir_lib.resolve(workdir)
  config = identity.absolute_paths(config)  # (data paths kept absolute)
  run_identity = identity.of_run(config, workdir_lib.MAY_CHANGE)
  setup.agree(config, workdir, run_identity)
  writer = hosts.is_writer()
  created = writer and setup.claim(workdir, force_new)
  written = False
  try:
    # Before anything is written: a mesh that leaves out a process is an error on every one.
    platform = config.train.platform
    mesh = parallel.make_mesh(config.train.num_devices, jax.devices(platform) if platform else None)
    with workdir_lib.Lock(workdir) if writer else contextlib.nullcontext():
      if writer:
        workdir_lib.check_resume(workdir, config, run_identity, allow_data_change)
      method = build(config, mesh)
      config = setup.fitted(method, mesh)
      if writer:
        setup.mark_the_run(workdir, config, method)
      written = True
      hosts.barrier('wsabie_jax: workdir checked')
      # Everything runs on the mesh's devices (a CPU mesh on a GPU machine
      # included), each process's on its own: one it does not drive cannot be read.
      with jax.default_device(parallel.local_devices(mesh)[0]):
        return _run(config, workdir, method, build, run_identity)
  finally:
    if created and not written:  # nothing of the run in it: leave no trace
      (workdir / 'LOCK').unlink(missing_ok=True)
      with contextlib.suppress(OSError):
        workdir.rmdir()


def _run(config, workdir: pathlib.Path, method: Method, build, run_identity: dict) -> dict:
  """The run in a checked workdir: resumed or started, trained (and refit on
  the whole training file: train.refit), its model tested; metrics.json written."""
  metric = _start(config, workdir, method)
  ckpts = checkpoints.Checkpoints(workdir)
  hosts.WHEREABOUTS.checkpoints = pathlib.Path(ckpts.latest.directory)
  summaries = None
  try:
    state, record = method.init_state(), None
    restored = ckpts.restore(ckpts.latest, state, set_aside=True)
    if restored is not None:
      state, record = restored
      log.info('resumed from step %d (%s)', int(state.step), resume.account(record, metric))
    summaries = Summaries(workdir)
    recorder = Recorder(workdir, metric, config.train.patience, summaries, record)
    if restored is not None:
      resume.go_on_or_say(config.train, int(state.step), recorder.record,
                          _total_steps(config.train, method.stream))
    _prepare(method, recorder.record, charged=restored is None)
    recorder.record.identity = run_identity  # in every checkpoint: what it was trained on
    recorder.forget_after(int(state.step))  # validations past the checkpoint are replayed
    with objects_frozen():
      state = _train(config, state, method, ckpts, recorder, summaries)
    _say_checksum(state)
    if refit.wanted(config, recorder.record, ckpts):
      refit.run(config, method, build, recorder.record, ckpts, int(state.step),
                best=lambda: _best(ckpts, state))
    result = _test(method, ckpts, state, workdir)
  finally:
    if summaries is not None:
      summaries.close()
    ckpts.close()
  result = _with_run_figures(result, config, method, recorder.record, state)
  summaries.scalars(result['steps'], result, 'test')
  recorder.warn_if_below_baseline(result, 'test')
  if hosts.is_writer():
    workdir_lib.write_file(workdir / 'metrics.json',
                           json.dumps(metrics_lib.for_file(result), indent=2, sort_keys=True))
  return result


def _start(config, workdir: pathlib.Path, method: Method) -> str:
  """The metric that selects the best state, checked; the data and devices
  logged, the vocabulary saved."""
  metric = config.train.select_metric
  if metric not in method.select_metrics:
    raise ValueError(f'config.train.select_metric={metric!r} is not one of '
                     f'{sorted(method.select_metrics)}')
  log.info('data: %s', method.description)
  if hosts.is_writer():
    workdir_lib.save_vocabulary(workdir, method.vocabulary)
  if method.mesh.devices.size > 1:
    log.info('data parallel over %d devices (%d a process, %d processes)',
             method.mesh.devices.size, len(parallel.local_devices(method.mesh)),
             jax.process_count())
  return metric


def _prepare(method: Method, record: RunRecord, charged: bool) -> None:
  """The method's work before the steps (Method.prepare), its seconds charged
  to train.max_seconds once: a resumed run's record holds them already."""
  if method.prepare is not None:
    seconds = method.prepare()
    record.train_seconds += seconds if charged else 0.0


def _say_checksum(state) -> None:
  """Every process holds the same replica: with several, each log says so."""
  if jax.process_count() > 1:
    log.info('process %d: the state after step %d has checksum %08x', jax.process_index(),
             int(state.step), checksum(state))


def _best(ckpts, state):
  """The best state on validation (the last where none was saved)."""
  best = ckpts.restore_best(state)
  return best[0] if best is not None else state


def _test(method: Method, ckpts, state, workdir) -> dict:
  """The run's model tested: the refit where the run made one, else the best
  on validation (the last state where neither was saved), with that best
  beside it for the choices made on validation."""
  best = _best(ckpts, state)
  model = ckpts.restore_model(state) if ckpts.has_refit else None
  return method.test(model[0] if model is not None else best, workdir, best)


def _with_run_figures(result: dict, config, method: Method, r: RunRecord, state) -> dict:
  """The test metrics with the run's own figures (metrics.json's other keys)."""
  metric = config.train.select_metric
  steps = int(jax.device_get(state.step))
  rows_done = steps * config.train.batch_size
  pairs_done = rows_done * method.stream.pairs_per_row
  return {**result, 'steps': steps, 'best_step': r.best_step, f'valid_{metric}': r.best_metric,
          'train_seconds': r.train_seconds,
          'eval_every_steps': r.eval_every_steps or config.train.eval_every_steps,
          'train_examples_per_sec': pairs_done / max(r.step_seconds, 1e-9),
          'stopped': Stop(r.stopped).value or 'completed',
          'epochs': rows_done / method.stream.num_examples,
          'input_wait_seconds': r.input_wait_seconds, 'rate_drops': r.rate_drops,
          'refit_steps': r.refit_steps}


def _total_steps(train, stream) -> int:
  return settings.total_steps(train, math.ceil(stream.num_examples / train.batch_size))


def _train(config, state, method: Method, ckpts, recorder: Recorder, summaries: Summaries):
  """Alg. 1's outer loop: calls of steps until a budget or patience runs out, each
  followed by the hooks (hooks.py, profile.py) and the boundary (`_at_boundary`)."""
  train, r, stream = config.train, recorder.record, method.stream
  total = _total_steps(train, stream)
  step = start = int(state.step)
  clock = Clock(r.train_seconds, r.step_seconds)
  timing = hooks.StepTime(clock, lambda: steps.compile_seconds)
  spacing = hooks.ValidationSpacing(train, r, stream.num_examples, timing, clock)
  steps = dispatch.Dispatcher(train, method, start, total, eval_every=lambda: spacing.every)
  train_log = hooks.TrainLog(train, total, stream.pairs_per_row, train.max_seconds
                             - r.train_seconds, summaries, lambda stats: _check_finite(stats, ckpts),
                             clock)
  at_boundary = functools.partial(_at_boundary, train=train, method=method, recorder=recorder,
                                  ckpts=ckpts, clock=clock, steps=steps, spacing=spacing,
                                  reserve=refit.Reserve(config, clock, start, method.refit_work))
  trace = profile.CallTrace(train.profile_calls, ckpts.workdir, clock, spacing, total)
  state = steps.place(at_rate(state, train, r))
  with interrupts.caught() as requests:  # Ctrl-C, SIGTERM: saved at the next boundary
    after = [train_log, timing, hooks.StopDecision(train.max_seconds, clock, requests), spacing,
             trace]
    try:
      while step < total and not r.stopped:
        timing.before()
        state, stats, done = steps(state, step)
        step += done
        call = hooks.Call(step, done, state, stats, first=step - done == start)
        for hook in after:
          hook.after(call)
        state = at_boundary(call, last=step == total)
        if call.stop:
          _stop(call, requests, ckpts)
          break
    finally:
      trace.stop()
      ckpts.write_best()  # a stop by an error too: the held best is a validated state
      steps.close()
      train_log.close()
  _input_spent(steps, train_log, r, clock)
  return state


def _input_spent(steps, train_log, record: RunRecord, clock: Clock) -> None:
  """What the calls' input held and how long the loop waited for it: logged,
  the wait in the record (this process's calls, for metrics.json)."""
  train_log.memory(steps.input_held())
  record.input_wait_seconds = steps.input_wait_seconds
  log.info('waited %.2f s for the calls\' input in %.2f s of steps', steps.input_wait_seconds,
           clock.step_seconds)


def _at_boundary(call, last: bool, train, method: Method, recorder: Recorder, ckpts,
                 clock: Clock, steps, spacing, reserve):
  """After a call: at a validation interval (or the last call) the state is
  checked and validated; patience run out sends it back to its best at a
  lower rate (train.plateau_drops times, and while the budget holds the refit
  after it: refit.Reserve; then the run stops); at a checkpoint interval or a
  stop it is saved. Returns the state to go on from."""
  r = recorder.record
  last = last or call.stop == Stop.MAX_SECONDS
  validate = hooks.crossed(call.step, call.done, spacing.every) or last
  save = hooks.crossed(call.step, call.done, train.checkpoint_every_steps) or last or call.stop
  if validate or save:
    seconds = _check_and_validate(call, validate, method, recorder, ckpts, clock)
    if seconds is not None:
      spacing.validated(seconds)
  if validate and not (last or call.stop) and reserve.refit_due(call.step, spacing.every, r,
                                                                spacing.seconds):
    call.stop = Stop.EARLY_STOPPING  # (after a drop: the budget's end is the refit's)
  elif (call.stop == Stop.EARLY_STOPPING and r.rate_drops < train.plateau_drops
        and reserve.allows_drop(call.step, spacing.every, r, spacing.seconds)):
    with clock.excluded():  # (the calls built ahead stay valid: no step is replayed)
      call.state = steps.place(_back_to_best(call, train, r, ckpts))
    call.stop, save = Stop.NONE, True  # (a resumed run goes on at the lowered rate)
  if save or call.stop:
    _save(call, method.stream, recorder, ckpts, clock)
  return call.state


def at_rate(state, train, record: RunRecord):
  """The state at the rate the run has reached: every learning rate ÷
  plateau_factor for each drop so far (`record.rate_drops`). The rate is a
  value of the state (`rate_scale`), so a drop changes a number and the
  compiled call stays (tests/train_test.py counts its compilations)."""
  scale = train.plateau_factor ** -record.rate_drops
  return state._replace(rate_scale=jnp.asarray(scale, jnp.float32))


def _back_to_best(call, train, record: RunRecord, ckpts):
  """Reduce-on-plateau (train.plateau_drops): patience has run out, so the run
  goes back to its best state with the rate lowered (`at_rate`), rather than
  stopping. Its step count and data position go on (a drop replays no batch);
  patience starts anew."""
  ckpts.write_best()
  best = ckpts.restore_best(call.state)
  state = call.state if best is None else best[0]
  record.rate_drops, record.evals_without_improvement = record.rate_drops + 1, 0
  record.path, record.path_start = list(record.best_path), call.step  # (the best's path goes on)
  state = at_rate(state, train, record)
  log.info('step %d: %d validations without a better one: back to the best (step %d), '
           'learning rate ÷%g (drop %d of %d)', call.step, train.patience, record.best_step,
           train.plateau_factor ** record.rate_drops, record.rate_drops,
           train.plateau_drops)
  return state._replace(step=call.state.step)


def _check_and_validate(call, validate: bool, method: Method, recorder: Recorder, ckpts,
                        clock: Clock) -> float | None:
  """At a boundary: the state checked finite, then validated (a stop when
  patience has run out). The steps' time counts; what reads the state does
  not. Returns the validation's seconds (None: none ran)."""
  jax.block_until_ready(call.state)
  step_seconds = clock.step_seconds
  with clock.excluded():  # (the finiteness check's first call compiles)
    _check_finite(call.stats, ckpts, call.state)
    if not validate:
      return None
    start = clock.seconds
    with profile.named('validate'):
      stop = _validate(method, call.state, recorder, ckpts, step_seconds)
    if stop:
      call.stop = call.stop or Stop.EARLY_STOPPING
    return clock.seconds - start


def _save(call, stream, recorder: Recorder, ckpts, clock: Clock) -> None:
  """The latest checkpoint, the best before it (the latest's record names it).
  An interrupted run is not over: its record lets a rerun go on."""
  r = recorder.record
  r.train_seconds, r.step_seconds = clock.seconds, clock.step_seconds
  r.stopped = Stop.NONE if call.stop == Stop.INTERRUPTED else call.stop
  r.data_position = stream.position(call.step)
  with clock.excluded(), profile.named('checkpoint'):
    ckpts.write_best()
    ckpts.save(ckpts.latest, call.state, r.to_json())


def _stop(call, requests, ckpts) -> None:
  if call.stop == Stop.INTERRUPTED:
    signum = requests.signum or signal.SIGINT
    raise interrupts.Interrupted(
        f'{interrupts.NAMES.get(signum, signum)} at step {call.step}; saved checkpoint '
        f'{call.step} in {ckpts.latest.directory}; rerun the same command to resume', signum)
  log.info('stopping at step %d: %s', call.step, call.stop.value)


def checksum(state) -> int:
  """CRC-32 of a state's values (this process's copy of a replicated state)."""
  crc = 0
  for leaf in jax.tree.leaves(state):
    crc = zlib.crc32(np.ascontiguousarray(jax.device_get(leaf)).tobytes(), crc)
  return crc


@jax.jit
def _all_finite(state) -> jax.Array:
  leaves = [x for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _check_finite(stats: dict, ckpts, state=None) -> None:
  """Raises Diverged when a step of the call that produced `stats` saw a
  non-finite loss or score (dispatch.checked), or when `state` (given before
  it is validated or saved: as often as checkpoints, which read all of it
  anyway) holds one."""
  bad_step = int(jax.device_get(stats['nonfinite_step']))
  if bad_step < 0 and (state is None or bool(_all_finite(state))):
    return
  where = f'step {bad_step}' if bad_step >= 0 else f'a step before {int(state.step)}'
  kept = ckpts.latest.latest_step()
  raise Diverged(
      f'training produced non-finite values (NaN or inf) at {where}; stopped without saving '
      f'them. ' + (f'The last good checkpoint, step {kept}, is kept in {ckpts.latest.directory}. '
                   if kept is not None else 'No checkpoint was saved before. ')
      + 'Lower the learning rate (optim.*learning_rate*) or check the inputs for huge values.')


def _validate(method: Method, state, recorder: Recorder, ckpts, step_seconds: float) -> bool:
  """Validates, keeps the best checkpoint; True when patience has run out."""
  values = method.validate(state)
  if values is None:  # no validation split: nothing to select on, the last state is the model
    return False
  step = int(state.step)
  if recorder.validation(step, values, step_seconds):
    ckpts.keep_best(state, recorder.record.to_json())
  r = recorder.record
  log.info('step %d: valid %s %.4f (best %.4f at step %d)', step, recorder.metric,
           values[recorder.metric], r.best_metric, r.best_step)
  return recorder.out_of_patience

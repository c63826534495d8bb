"""The training loop: steps, validation and early stopping, checkpoints, summaries.

Alg. 1's outer loop (paper 000 §3): repeat steps "until validation error does
not improve", evaluating on a validation subset every so often, keeping the
best checkpoint, and finally scoring the best one on the test split. The
method (what to train, how to validate and test it) comes in as plain data
(method.Method), built by `build(config, mesh)`; this module knows none.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import pathlib
import resource
import signal
import sys
import zlib
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax.core import metrics as metrics_lib
from wsabie_jax.training import (checkpoints, dispatch, hosts, identity, interrupts, parallel,
                                 settings, workdir as workdir_lib)
from wsabie_jax.training.method import Method
from wsabie_jax.training.progress import Progress
from wsabie_jax.training.recorder import Clock, Recorder, Summaries, objects_frozen, read_stats

log = logging.getLogger('wsabie_jax')


class Diverged(RuntimeError):
  """Training produced non-finite values; the message names the step and the
  last good checkpoint (kept: nothing non-finite is ever saved)."""


def train_and_evaluate(config: ml_collections.ConfigDict, workdir,
                       build: Callable[[ml_collections.ConfigDict, object], Method],
                       force_new: bool = False, allow_data_change: bool = False) -> dict:
  """Trains (resuming from workdir), evaluates the best checkpoint, writes metrics.json.

  The workdir is locked for the run (a second run there stops at once), and a
  run it already holds is resumed only with the same config up to
  workdir.MAY_CHANGE and the same data files (identity.py; or any data with
  `allow_data_change`), checked before anything is written; so are the data
  themselves (`build` reads them): a workdir created for a run that fails
  there is removed again. `force_new` moves a previous run aside
  (WORKDIR.old-TIME) and starts afresh. Data paths are kept absolute.
  Several processes (training/hosts.py): process 0 alone checks and writes
  the workdir's files and holds the lock; the others wait for it.
  """
  workdir = workdir_lib.resolve(workdir)
  config = identity.absolute_paths(config)
  run_identity = identity.of_run(config, workdir_lib.MAY_CHANGE)
  writer = hosts.is_writer()
  created = False
  if writer:
    if force_new:
      workdir_lib.set_aside(workdir)
    workdir_lib.check_for_training(workdir)
    created = not workdir.exists()
    workdir.mkdir(parents=True, exist_ok=True)
  platform = config.train.platform
  written = False
  try:
    # Before anything is written: a mesh that leaves out a process is an error on every one.
    mesh = parallel.make_mesh(config.train.num_devices,
                              jax.devices(platform) if platform else None)
    with workdir_lib.Lock(workdir) if writer else contextlib.nullcontext():
      if writer:
        workdir_lib.check_resume(workdir, config, run_identity, allow_data_change)
      method = build(config, mesh)
      config = method.config  # ('auto' fields fitted to the data)
      settings.check_fitted(config, config.method)
      parallel.check_fits(jax.eval_shape(method.init_state), parallel.local_devices(mesh)[0],
                          method.description)
      parallel.check_batch(config.train.batch_size, method.stream.num_examples)
      if writer:
        (workdir / 'config.json').write_text(config.to_json_best_effort(indent=2))
      written = True
      hosts.barrier('wsabie_jax: workdir checked')
      # Everything runs on the mesh's devices (a CPU mesh on a GPU machine
      # included), each process's on its own: one it does not drive cannot be read.
      with jax.default_device(parallel.local_devices(mesh)[0]):
        return _run(config, workdir, method, run_identity)
  finally:
    if created and not written:  # nothing of the run in it: leave no trace
      (workdir / 'LOCK').unlink(missing_ok=True)
      with contextlib.suppress(OSError):
        workdir.rmdir()


def _run(config, workdir: pathlib.Path, method: Method, run_identity: dict) -> dict:
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
  ckpts = checkpoints.Checkpoints(workdir)
  hosts.WHEREABOUTS.checkpoints = pathlib.Path(ckpts.latest.directory)
  summaries = None
  try:
    state, record = method.init_state(), None
    restored = ckpts.restore(ckpts.latest, state, set_aside=True)
    if restored is not None:
      state, record = restored
      log.info('resumed from step %d (%s)', int(state.step),
               {k: v for k, v in record.items() if k != 'identity'})
    summaries = Summaries(workdir)
    recorder = Recorder(workdir, metric, config.train.patience, summaries, record)
    recorder.record['identity'] = run_identity  # in every checkpoint: what it was trained on
    recorder.forget_after(int(state.step))  # validations past the checkpoint are replayed
    with objects_frozen():
      state = _train(config, state, method, ckpts, recorder, summaries)
    if jax.process_count() > 1:  # every process holds the same replica: its log says so
      log.info('process %d: the state after step %d has checksum %08x', jax.process_index(),
               int(state.step), checksum(state))
    best = ckpts.restore_best(state)
    result = method.test(best[0] if best is not None else state, workdir)
  finally:
    if summaries is not None:
      summaries.close()
    ckpts.close()
  r = recorder.record
  steps = int(jax.device_get(state.step))
  rows_done = steps * config.train.batch_size
  pairs_done = rows_done * _pairs_per_row(method.stream)
  result.update(steps=steps, best_step=r['best_step'], **{f'valid_{metric}': r['best_metric']},
                train_seconds=r['train_seconds'],
                eval_every_steps=r.get('eval_every_steps', config.train.eval_every_steps),
                train_examples_per_sec=pairs_done / max(r['step_seconds'], 1e-9),
                stopped=r['stopped'] or 'completed', epochs=rows_done / method.stream.num_examples)
  summaries.scalars(steps, result, 'test')
  recorder.warn_if_below_baseline(result, 'test')
  if hosts.is_writer():
    (workdir / 'metrics.json').write_text(json.dumps(metrics_lib.for_file(result), indent=2,
                                                     sort_keys=True))
  return result


def _train(config, state, method: Method, ckpts, recorder: Recorder, summaries: Summaries):
  """Steps until the step budget, the time budget or patience runs out."""
  train, stream, r = config.train, method.stream, recorder.record
  total_steps = train.max_steps or train.num_epochs * math.ceil(stream.num_examples /
                                                                train.batch_size)
  start_step = int(state.step)
  pairs_per_row = _pairs_per_row(stream)
  progress = Progress(total_steps, train.batch_size * pairs_per_row,
                      stream=sys.stderr if hosts.is_writer() else None,  # one bar
                      unit='pairs' if pairs_per_row != 1.0 else 'ex',
                      budget_seconds=max(train.max_seconds - r['train_seconds'], 1e-3)
                      if train.max_seconds else 0.0, may_stop_early=train.patience > 0)
  clock = Clock(r['train_seconds'], r['step_seconds'])
  # A fast run on a small set runs many epochs a second and can overfit between
  # budget-spread validations; max_epochs_between_evals caps the interval.
  epochs_cap = train.max_epochs_between_evals
  cap = (max(1, math.ceil(epochs_cap * stream.num_examples / train.batch_size)) if epochs_cap
         else math.inf)
  # The validation interval: steps.eval_every, which also cuts the calls.
  every = min(r.get('eval_every_steps') or train.eval_every_steps, cap)
  steps = dispatch.Dispatcher(train, method, start_step, total_steps, eval_every=every)
  log.info('%s: %d steps a call (%s)', method.mesh.devices.flat[0].platform,
           train.steps_per_call, steps.mode)
  state = steps.place(state)
  step, pending = start_step, None
  # Steps known finished and the step time by then, counted from the end of the
  # first call (its kernels' one-time set-up left out): the speed the
  # validation interval is fitted to.
  finished = since = None
  with interrupts.caught() as requests:  # Ctrl-C, SIGTERM: saved at the next boundary
    try:
      while step < total_steps and not r['stopped']:
        first = step == start_step
        compiled = steps.compile_seconds
        state, stats, done = steps(state, step)
        clock.leave_out(steps.compile_seconds - compiled)  # (the first call's, a new budget class's)
        step += done
        hosts.WHEREABOUTS.step = step
        if first:
          jax.block_until_ready(state)
          since = (step, clock.step_seconds)
        if pending is not None:
          _check_finite(pending, ckpts)  # one call late: the device never waits on the host
          finished = (step - done, clock.step_seconds)  # the previous call has ended by now
          if _crossed(step, done, train.log_every_steps):
            scalars = read_stats(pending)
            summaries.scalars(step - done, scalars, 'train')
            progress.update(step, **scalars)
        pending = stats
        # One agreed decision (process 0's) a call: hosts stop together or not at all.
        decided = parallel.agreed(int(bool(train.max_seconds and clock.seconds >= train.max_seconds))
                                  | 2 * int(requests.signum is not None))
        stop = 'interrupted' if decided & 2 else 'max_seconds' if decided & 1 else ''
        # (not on a signal: validating off schedule would make the resumed run differ)
        last = step == total_steps or stop == 'max_seconds'
        fitted = 0
        if ('eval_every_steps' not in r and train.max_seconds and train.evals_per_budget
            and finished is not None):
          # The calls' finished steps, read off the check above: waiting on the
          # device to time them would stall the pipeline on every call until fitted.
          fitted = parallel.agreed(_budget_interval(
              train, finished[0] - since[0], finished[1] - since[1], clock.seconds))
        if fitted:
          r['eval_every_steps'] = steps.eval_every = min(fitted, cap)
          log.info('validating every %d steps (about %d times in %.0f s at the speed so far)',
                   steps.eval_every, train.evals_per_budget, train.max_seconds)
        validate = _crossed(step, done, steps.eval_every) or last
        save = _crossed(step, done, train.checkpoint_every_steps) or last or stop
        if validate or save:
          jax.block_until_ready(state)  # the steps' time counts; what reads the state does not
          step_seconds = clock.step_seconds
          with clock.excluded():  # (the finiteness check's first call compiles)
            _check_finite(stats, ckpts, state)
            if validate and _validate(method, state, recorder, ckpts, step_seconds):
              stop = stop or 'early_stopping'
        if save or stop:
          # (an interrupted run is not over: its record must let a rerun go on)
          r.update(train_seconds=clock.seconds, step_seconds=clock.step_seconds,
                   stopped='' if stop == 'interrupted' else stop, data_position=stream.position(step))
          with clock.excluded():
            ckpts.write_best()  # before the latest, whose record names it
            ckpts.save(ckpts.latest, state, r)
        if stop == 'interrupted':
          signum = requests.signum or signal.SIGINT
          raise interrupts.Interrupted(
              f'{interrupts.NAMES.get(signum, signum)} at step {step}; saved checkpoint {step} in '
              f'{ckpts.latest.directory}; rerun the same command to resume', signum)
        if stop:
          log.info('stopping at step %d: %s', step, stop)
          break
    finally:
      ckpts.write_best()  # a stop by an error too: the held best is a validated state
      steps.close()
      progress.close()
  log.info('process %d: input held at most %s; peak memory %s MiB', jax.process_index(),
           steps.input_held(), f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f}')
  return state


def checksum(state) -> int:
  """CRC-32 of a state's values (this process's copy of a replicated state)."""
  crc = 0
  for leaf in jax.tree.leaves(state):
    crc = zlib.crc32(np.ascontiguousarray(jax.device_get(leaf)).tobytes(), crc)
  return crc


def _pairs_per_row(stream) -> float:
  """Pairs a batch row holds: Q > 1 rows hold several (data/batching.PairStream)."""
  return getattr(stream, 'pairs_per_row', 1.0)


def _budget_interval(train, steps: int, step_seconds: float, seconds: float) -> int:
  """With max_seconds and evals_per_budget set, the validation interval in
  steps that spreads evals_per_budget validations over what is left of the
  budget (wall-clock: compilation spent already), at the step speed measured
  once a quarter of an interval's time has run (0 until then: eval_every_steps
  holds). Patience counts validations, so it scales
  with the budget too: a 10-second and a 10-minute run both end on their best
  checkpoint (the last state is always validated). Kept in the checkpoint
  record, so a resumed run validates where the first would have."""
  per_eval = max(train.max_seconds - seconds, 0) / train.evals_per_budget
  if steps <= 0 or step_seconds <= 0 or step_seconds < 0.25 * per_eval:
    return 0
  return max(1, round(steps / step_seconds * per_eval))


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


def _crossed(step: int, done: int, every: int) -> bool:
  """Whether the last `done` steps, ending at `step`, passed a multiple of `every`."""
  return step // every > (step - done) // every


def _validate(method: Method, state, recorder: Recorder, ckpts, step_seconds: float) -> bool:
  """Validates, keeps the best checkpoint; True when patience has run out."""
  values = method.validate(state)
  if values is None:  # no validation split: nothing to select on, the last state is the model
    return False
  step = int(state.step)
  if recorder.validation(step, values, step_seconds):
    ckpts.keep_best(state, recorder.record)
  r = recorder.record
  log.info('step %d: valid %s %.4f (best %.4f at step %d)', step, recorder.metric,
           values[recorder.metric], r['best_metric'], r['best_step'])
  return recorder.out_of_patience

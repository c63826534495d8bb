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
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from wsabie_jax.data import batching
from wsabie_jax.training import checkpoints, parallel, workdir as workdir_lib
from wsabie_jax.training.method import Method
from wsabie_jax.training.progress import Progress
from wsabie_jax.training.recorder import Clock, Recorder, Summaries, read_stats

log = logging.getLogger('wsabie_jax')


def train_and_evaluate(config: ml_collections.ConfigDict, workdir,
                       build: Callable[[ml_collections.ConfigDict, object], Method]) -> dict:
  """Trains (resuming from workdir), evaluates the best checkpoint, writes metrics.json."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / 'config.json').write_text(config.to_json_best_effort(indent=2))
  platform = config.train.get('platform', '')
  mesh = parallel.make_mesh(config.train.get('num_devices', 0),
                            jax.devices(platform) if platform else None)
  # Everything runs on the mesh's devices (a CPU mesh on a GPU machine included).
  with jax.default_device(mesh.devices.flat[0]):
    return _run(config, workdir, mesh, build(config, mesh))


def _run(config, workdir: pathlib.Path, mesh, method: Method) -> dict:
  metric = config.train.select_metric
  if metric not in method.select_metrics:
    raise ValueError(f'config.train.select_metric={metric!r} is not one of '
                     f'{sorted(method.select_metrics)}')
  log.info('data: %s', method.description)
  workdir_lib.save_vocabulary(workdir, method.vocabulary)
  if mesh.devices.size > 1:
    log.info('data parallel over %d devices', mesh.devices.size)
  ckpts = checkpoints.Checkpoints(workdir)
  state, record = method.init_state(), None
  restored = ckpts.restore(ckpts.latest, state)
  if restored is not None:
    state, record = restored
    log.info('resumed from step %d (%s)', int(state.step), record)
  summaries = Summaries(workdir)
  recorder = Recorder(workdir, metric, config.train.patience, summaries, record)
  state = _train(config, method.place(state), method, ckpts, recorder, summaries)

  best = ckpts.restore(ckpts.best, state)
  result = method.test(best[0] if best is not None else state, workdir)
  r = recorder.record
  steps = int(jax.device_get(state.step))
  pairs_done = steps * config.train.batch_size
  result.update(steps=steps, best_step=r['best_step'], **{f'valid_{metric}': r['best_metric']},
                train_seconds=r['train_seconds'],
                train_examples_per_sec=pairs_done / max(r['step_seconds'], 1e-9),
                stopped=r['stopped'] or 'completed', epochs=pairs_done / method.stream.num_examples)
  summaries.scalars(steps, result, 'test')
  summaries.close()
  ckpts.close()
  if jax.process_index() == 0:
    (workdir / 'metrics.json').write_text(json.dumps(result, indent=2, sort_keys=True))
  return result


def _train(config, state, method: Method, ckpts, recorder: Recorder, summaries: Summaries):
  """Steps until the step budget, the time budget or patience runs out."""
  train, stream, r = config.train, method.stream, recorder.record
  total_steps = train.max_steps or train.num_epochs * math.ceil(stream.num_examples /
                                                                train.batch_size)
  start_step = int(state.step)
  progress = Progress(total_steps, train.batch_size)
  clock = Clock(r['train_seconds'], r['step_seconds'])
  steps = _dispatcher(config, method, start_step, total_steps)
  step, pending = start_step, None
  while step < total_steps and not r['stopped']:
    first = step == start_step
    with clock.excluded() if first else contextlib.nullcontext():  # compilation
      state, stats, done = steps(state, step)
      if first:
        jax.block_until_ready(state)
    step += done
    if pending is not None and _crossed(step, done, train.log_every_steps):
      scalars = read_stats(pending)  # one call late: the device never waits on the host
      summaries.scalars(step - done, scalars, 'train')
      progress.update(step, **scalars)
    pending = stats
    stop = 'max_seconds' if train.max_seconds and clock.seconds >= train.max_seconds else ''
    last = step == total_steps or stop
    if _crossed(step, done, train.eval_every_steps) or last:
      jax.block_until_ready(state)  # the steps' time so far, for the history
      with clock.excluded():
        if _validate(method, state, recorder, ckpts, clock.step_seconds):
          stop = stop or 'early_stopping'
    if _crossed(step, done, train.checkpoint_every_steps) or last or stop:
      jax.block_until_ready(state)
      r.update(train_seconds=clock.seconds, step_seconds=clock.step_seconds, stopped=stop,
               data_position=stream.position(step))
      with clock.excluded():
        ckpts.save(ckpts.latest, state, r)
    if stop:
      log.info('stopping at step %d: %s', step, stop)
      break
  steps.close()
  progress.close()
  return state


def _crossed(step: int, done: int, every: int) -> bool:
  """Whether the last `done` steps, ending at `step`, passed a multiple of `every`."""
  return step // every > (step - done) // every


class _dispatcher:
  """Runs the next steps: one dispatch a step (batches built on the host, a
  thread ahead), or `train.steps_per_call` steps a dispatch as one jitted
  `lax.scan` over a device-resident stream — its arrays put on the device
  once, each call sending only the steps' example ids (the stream's own
  order, so both paths see the same batches). A call stops at the next
  validation or checkpoint, so those land on the same steps either way.
  Returns (state, stats of the call's last step, steps done)."""

  def __init__(self, config, method: Method, start_step: int, total_steps: int):
    train, stream = config.train, method.stream
    self.total, self.train, self.stream = total_steps, train, stream
    self.per_call = train.get('steps_per_call', 1)
    if self.per_call > 1 and (method.pure_step is None or not hasattr(stream, 'gather')):
      log.info('train.steps_per_call=%d: this method or stream runs one step a dispatch',
               self.per_call)
      self.per_call = 1
    if self.per_call == 1:
      self.batches = batching.prefetch((stream.batch(s) for s in range(start_step, total_steps)),
                                       put=method.put)
      self.step_fn = method.train_step
      return
    self.table = jax.device_put(stream.table())
    pure_step, gather = method.pure_step, stream.gather

    def many(state, table, ids_NxB, num_steps):
      """The first `num_steps` of N steps (one compiled shape for every call)."""
      def one(carry, i_ids):
        i, ids_B = i_ids
        state, last = carry
        return jax.lax.cond(i < num_steps, lambda: pure_step(state, gather(table, ids_B)),
                            lambda: (state, last)), None

      shapes = jax.eval_shape(pure_step, state, gather(table, ids_NxB[0]))[1]
      zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
      (state, stats), _ = jax.lax.scan(one, (state, zeros),
                                       (jnp.arange(ids_NxB.shape[0]), ids_NxB))
      return state, stats

    self.many = jax.jit(many, donate_argnums=0)

  def __call__(self, state, step: int):
    if self.per_call == 1:
      state, stats = self.step_fn(state, next(self.batches))
      return state, stats, 1
    t = self.train
    boundary = min(self.total, _next_multiple(step, t.eval_every_steps),
                   _next_multiple(step, t.checkpoint_every_steps))
    n = min(self.per_call, boundary - step)
    ids = [self.stream.ids(s) for s in range(step, step + n)]
    ids += [np.zeros_like(ids[0])] * (self.per_call - n)  # skipped inside the call
    state, stats = self.many(state, self.table, np.stack(ids), n)
    return state, stats, n

  def close(self):
    if self.per_call == 1:
      self.batches.close()


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def _validate(method: Method, state, recorder: Recorder, ckpts, step_seconds: float) -> bool:
  """Validates, keeps the best checkpoint; True when patience has run out."""
  values = method.validate(state)
  if values is None:  # no validation split: nothing to select on, the last state is the model
    return False
  step = int(state.step)
  if recorder.validation(step, values, step_seconds):
    ckpts.save(ckpts.best, state, recorder.record)
  r = recorder.record
  log.info('step %d: valid %s %.4f (best %.4f at step %d)', step, recorder.metric,
           values[recorder.metric], r['best_metric'], r['best_step'])
  return recorder.out_of_patience

"""The training loop: steps, validation and early stopping, checkpoints, summaries.

Alg. 1's outer loop: repeat steps "until validation error does not improve",
evaluating on a validation subset every so often (paper 000 §3), keeping the
best checkpoint, and finally scoring the best one on the test split.
"""
from __future__ import annotations

import json
import math
import pathlib
import time

import jax
import ml_collections
import logging

from wsabie_jax import checkpointing, methods, parallel, workdir as workdir_lib
from wsabie_jax.data import batching
from wsabie_jax.progress import Progress

log = logging.getLogger('wsabie_jax')


class _Summaries:
  """TensorBoard scalars under workdir/tensorboard (tensorboardX: no TensorFlow needed)."""

  def __init__(self, workdir):
    from tensorboardX import SummaryWriter
    self.writer = SummaryWriter(str(pathlib.Path(workdir) / 'tensorboard'))

  def scalars(self, step: int, values: dict, prefix: str):
    for name, value in values.items():
      self.writer.add_scalar(f'{prefix}/{name}', float(value), step)

  def close(self):
    self.writer.close()


def _read_stats(stats: dict) -> dict:
  s = jax.device_get(stats)
  pairs = max(int(s['pairs']), 1)
  out = {'loss': float(s['loss']) / pairs}
  if 'violator_found' in s:
    found = int(s['violator_found'])
    out['violator_rate'] = found / pairs
    out['draws_per_update'] = float(s['draws_to_violator']) / max(found, 1)
  return out


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Trains (resuming from workdir), evaluates the best checkpoint, writes metrics.json.

  config.method picks WSABIE (paper 000) or the image–word skip-gram (paper 004).
  """
  metric = config.train.select_metric
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / 'config.json').write_text(config.to_json_best_effort(indent=2))
  mesh = parallel.make_mesh(config.train.get('num_devices', 0))
  method = methods.build(config, mesh)
  if metric not in method.select_metrics:
    raise ValueError(f'config.train.select_metric={metric!r} is not one of '
                     f'{sorted(method.select_metrics)}')
  log.info('data: %s', method.description)
  workdir_lib.save_vocabulary(workdir, method.vocabulary)
  if mesh.devices.size > 1:
    log.info('data parallel over %d devices', mesh.devices.size)
  state = method.init_state()
  ckpts = checkpointing.Checkpoints(workdir)
  record = {'best_metric': -math.inf, 'best_step': -1, 'evals_without_improvement': 0,
            'train_seconds': 0.0, 'step_seconds': 0.0, 'stopped': ''}
  restored = ckpts.restore(ckpts.latest, state)
  if restored is not None:
    state, record = restored
    log.info('resumed from step %d (%s)', int(state.step), record)
  state = method.place(state)

  stream, train_step, put = method.stream, method.train_step, method.put
  steps_per_epoch = math.ceil(stream.num_examples / config.train.batch_size)
  total_steps = config.train.max_steps or config.train.num_epochs * steps_per_epoch
  summaries = _Summaries(workdir)
  start_step = int(state.step)
  progress = Progress(total_steps, config.train.batch_size)

  def validate(state, step_seconds: float):
    val = method.validate(state)
    if val is None:  # no validation split: nothing to select on, the last state is the model
      return False
    summaries.scalars(int(state.step), val, 'valid')
    entry = {'step': int(state.step), 'step_seconds': step_seconds, **val}
    if jax.process_index() == 0:
      with open(workdir / 'history.jsonl', 'a') as f:
        f.write(json.dumps(entry) + '\n')
    if val[metric] > record['best_metric']:
      record.update(best_metric=val[metric], best_step=int(state.step), evals_without_improvement=0)
      ckpts.save(ckpts.best, state, record)
    else:
      record['evals_without_improvement'] += 1
    log.info('step %d: valid %s %.4f (best %.4f at step %d)', int(state.step), metric,
             val[metric], record['best_metric'], record['best_step'])
    return record['evals_without_improvement'] >= config.train.patience

  # Wall-clock covers the whole loop; step time leaves out compilation,
  # validation and checkpointing, so examples/s measures the steps alone.
  t_loop = time.perf_counter()
  prior_seconds, overhead = record['train_seconds'], 0.0
  pending = None
  batches = batching.prefetch((stream.batch(s) for s in range(start_step, total_steps)), put=put)
  for step in range(start_step + 1, total_steps + 1):
    if record['stopped']:
      break
    t0 = time.perf_counter()
    state, stats = train_step(state, next(batches))
    if step == start_step + 1:
      jax.block_until_ready(state)
      overhead += time.perf_counter() - t0  # compilation
    if pending is not None and step % config.train.log_every_steps == 0:
      scalars = _read_stats(pending)  # one step late: the device never waits on the host
      summaries.scalars(step - 1, scalars, 'train')
      progress.update(step, **scalars)
    pending = stats
    elapsed = time.perf_counter() - t_loop
    stop = ''
    if config.train.max_seconds and prior_seconds + elapsed >= config.train.max_seconds:
      stop = 'max_seconds'
    t0 = time.perf_counter()
    if step % config.train.eval_every_steps == 0 or step == total_steps or stop:
      jax.block_until_ready(state)  # the steps' time so far, for the history
      t0 = time.perf_counter()
      if validate(state, record['step_seconds'] + t0 - t_loop - overhead):
        stop = stop or 'early_stopping'
    if step % config.train.checkpoint_every_steps == 0 or step == total_steps or stop:
      jax.block_until_ready(state)
      overhead += time.perf_counter() - t0
      elapsed = time.perf_counter() - t_loop
      record.update(train_seconds=prior_seconds + elapsed, stopped=stop,
                    step_seconds=record['step_seconds'] + elapsed - overhead,
                    data_position=stream.position(step))
      t_loop, prior_seconds, overhead = time.perf_counter(), record['train_seconds'], 0.0
      ckpts.save(ckpts.latest, state, record)
      overhead += time.perf_counter() - t_loop
    else:
      overhead += time.perf_counter() - t0
    if stop:
      log.info('stopping at step %d: %s', step, stop)
      break
  batches.close()
  progress.close()

  best = ckpts.restore(ckpts.best, state)
  best_state = best[0] if best is not None else state
  result = method.test(best_state, workdir)
  pairs_done = int(jax.device_get(state.step)) * config.train.batch_size
  result.update(
      steps=int(jax.device_get(state.step)), best_step=record['best_step'],
      **{f'valid_{metric}': record['best_metric']},
      train_seconds=record['train_seconds'],
      train_examples_per_sec=pairs_done / max(record['step_seconds'], 1e-9),
      stopped=record['stopped'] or 'completed', epochs=pairs_done / stream.num_examples)
  summaries.scalars(result['steps'], {k: v for k, v in result.items()
                                      if isinstance(v, (int, float))}, 'test')
  summaries.close()
  ckpts.close()
  if jax.process_index() == 0:
    (workdir / 'metrics.json').write_text(json.dumps(result, indent=2, sort_keys=True))
  return result

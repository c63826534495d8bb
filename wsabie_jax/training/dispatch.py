"""Feeding the device: a method's pure step compiled into calls of many steps.

The host's work per step (building a batch, a transfer, a Python dispatch)
is what caps an accelerator (docs/DESIGN.md §1): a loop dispatching one step
at a time leaves the device waiting on the host (docs/SCALE.md). So a call
runs up to `train.steps_per_call` steps as one jitted, donated loop:

  resident   the stream's arrays (`stream.table()`) are put on the devices
             once; a call sends only its steps' example ids (N×B int32) and
             each step gathers its batch there (`stream.gather`). Packed
             non-zeros (data/packing.py) are planned where that is cheaper
             (`train.plan_packs`, `plans_on_host`): on an accelerator the
             step builds its packs from the ids (the host's work per step
             is what caps it); on CPUs, where the host is the device, the
             host plans a call's packs in a few numpy passes on the
             prefetching thread and sends them with the ids, where the
             step's own scan over the slots would be many small kernels.
  streamed   a stream without a table (shards larger than memory) builds a
             chunk of N batches on the host, on `train.input_threads`
             threads (numpy's copies release the GIL), each gathered
             straight into its step of the call's stacked arrays, sent in
             one transfer, ahead of the device: the next chunks are built
             and copied while the device runs the current one.
  per step   `steps_per_call = 1`: one dispatch a step, batches prefetched.

A call's loop of steps has a length the compiler knows where
`train.call_length` is 'static' (an accelerator's 'auto'): XLA's GPU while
loop of a traced length copies its test to the host after every step and
waits for it, where a known length launches the steps back to back (and lets
a CUDA graph hold them). Full calls then run a program of `steps_per_call`
steps, the short ones before a validation or checkpoint the traced one: two
programs at most. A CPU runs its loops on the host either way ('traced').

Every mode feeds step s the stream's batch s (the stream's own order), so
parameters are bit-identical across modes and resume is exact mid-call
(tests/train_test.py). A call ends at the next validation or checkpoint
boundary, so long calls never delay a validation: the loop may move the
validation interval once it has fitted it to the time budget
(hooks.ValidationSpacing; the Dispatcher reads it through `eval_every()`), and
the calls not yet built follow it (the prefetching thread builds them in
order; the loop takes them in that order).

The time the loop waits for a call's input (`input_wait_seconds` in the
call's stats, per call; the train log's `input_wait_ms`) says whether the
input keeps up: near 0 it does, and the device, not the host, bounds the run.

Every step is checked for non-finite values at no extra pass: its loss and
the scores it read (a method's `nonfinite` stat count; a NaN row makes every
score that reads it NaN) are tested on the device, and the call's stats carry
`nonfinite_step`, the first step of the call that saw one (−1: none); the
loop stops on it (loop.py).

Several devices: WSABIE's per-device step (its own all-gathers) runs under
`shard_map`; other steps are partitioned by XLA (GSPMD). The batch (or the
ids) is split over the mesh along B, the state and the table replicated.

`train.deterministic` compiles the steps with XLA's deterministic GPU ops:
scatter-adds of repeated rows (a step's gradient rows) are then summed in a
fixed order, so a resumed GPU run equals an uninterrupted one. It is off by
default: the ordered scatter-adds make the WSABIE step many times slower
(docs/SCALE.md).
Without it a GPU run differs from its resumed twin by float round-off.
CPUs and TPUs are deterministic already; the option changes nothing there.
"""
from __future__ import annotations

import concurrent.futures
import functools
import logging
import time
from typing import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from wsabie_jax.data import batching
from wsabie_jax.training import parallel, profile, recorder, settings
from wsabie_jax.training.method import Method

log = logging.getLogger('wsabie_jax')


def compiler_options(deterministic: bool) -> dict:
  """XLA options for the training steps (see the module docstring)."""
  return {'xla_gpu_deterministic_ops': bool(deterministic)}


def _resolved(train, mesh, field: str):
  """train.`field`, 'auto' resolved for the mesh's platform (settings.resolved)."""
  return settings.resolved(train, parallel.platform(mesh)).get(field, getattr(train, field))


def static_length(train, mesh) -> bool:
  """Whether a call's loop has a length the compiler knows (`train.call_length`)."""
  return _resolved(train, mesh, 'call_length') == 'static'


def plans_on_host(train, mesh) -> bool:
  """Whether the host plans the calls' packs (`train.plan_packs`; the module
  docstring says why)."""
  return _resolved(train, mesh, 'plan_packs') == 'host'


def checked(step):
  """`step` with `nonfinite_step` in its stats: the state's step after it when
  its loss or the scores it read were not finite, else −1."""
  def checked_step(state, batch):
    state, stats = step(state, batch)
    bad = ~jnp.isfinite(stats['loss']) | (stats.get('nonfinite', 0) > 0)
    return state, {**stats, 'nonfinite_step': jnp.where(bad, state.step, -1).astype(jnp.int32)}
  return checked_step


def call_schedule(start: int, total: int, per_call: int,
                  every: Callable[[], tuple[int, ...]]) -> Iterator[tuple[int, int]]:
  """(first step, steps) of each call: `per_call` steps, cut at multiples of
  the intervals `every()` gives when the call is built."""
  step = start
  while step < total:
    boundary = min([total] + [(step // e + 1) * e for e in every()])
    n = min(per_call, boundary - step)
    yield step, n
    step += n


class Dispatcher:
  """Runs the next call of steps. `__call__(state, step)` -> (state, stats of
  the call's last step, steps done); `place(state)` puts a state on the mesh."""

  PREFETCH = 2  # calls built ahead: with the one being built and the one running, 4 held

  def __init__(self, train, method: Method, start_step: int, total_steps: int,
               eval_every: Callable[[], int] | None = None):
    self.mesh, self._method = method.mesh, method
    self.multi = self.mesh.devices.size > 1
    self.options = compiler_options(train.deterministic)
    self.gather_ahead = train.gather_ahead
    self.static = static_length(train, method.mesh)
    fitted = settings.for_platform(train, parallel.platform(self.mesh))
    per_call = train.steps_per_call or fitted['steps_per_call']
    threads = train.input_threads or fitted['input_threads']
    stream = method.stream
    # The validation interval the calls are cut at, read as each call is built
    # (the loop's hooks may move it).
    eval_every = eval_every or (lambda: train.eval_every_steps)
    schedule = call_schedule(start_step, total_steps, per_call,
                             lambda: (eval_every(), train.checkpoint_every_steps))
    self.rows = self._rows_of_this_process(train, stream.resident)
    calls, put = self._inputs(train, stream, schedule, per_call)
    log.info('%s: %d steps a call (%s)', parallel.platform(self.mesh), per_call, self.mode)
    self.call_bytes = 0  # the most one call's input (its ids, plans or batches) has held
    # Streamed batches are built on `threads` threads (in order: the same batches).
    self._builders = (concurrent.futures.ThreadPoolExecutor(threads, 'batch-builder')
                      if not stream.resident and threads > 1 else None)
    self.calls = batching.prefetch(calls, size=self.PREFETCH, put=put)
    self.input_wait_seconds = 0.0  # the loop's wait for the calls' input, all calls
    self._executables = {}  # by the packs' budget class and the inputs' shapes
    self.compile_seconds = 0.0  # spent compiling calls: the loop leaves it out of the steps' time

  def _rows_of_this_process(self, train, resident: bool) -> tuple[int, int] | None:
    """Several processes: a streamed batch is built where it is used, each
    process its own rows of every step's batch (streams take `rows`), never
    the others'. Resident data is on every device already; ids are tiny."""
    if jax.process_count() == 1 or resident:
      return None
    rows = parallel.local_rows(train.batch_size)
    log.info('process %d builds rows %d-%d of each batch of %d', jax.process_index(),
             rows[0], rows[1] - 1, train.batch_size)
    return rows

  def _inputs(self, train, stream, schedule, per_call: int):
    """(the calls' inputs as the host builds them, one per (first step, steps)
    of `schedule`; how one is put on the devices), and the mode they run in."""
    resident = stream.resident
    self.planned = False  # the host plans the packs (resident calls only)
    if per_call == 1:
      self.mode = 'per step'
      self.fn = self._compile_one(self._method)
      calls = ((s, 1, self._counted(self._batch(stream, s)), None) for s, _ in schedule)
      return calls, lambda c: (c[0], c[1], self._put_batch(c[2], axis=0), None)
    self.planned = resident and stream.plans and plans_on_host(train, self.mesh)
    self.mode = ('resident, packs planned on the host' if self.planned else 'resident'
                 ) if resident else 'streamed'
    self._per_call, self._fns = per_call, {}
    self.table = self._replicate(stream.table()) if resident else {}
    calls = (self._call_input(stream, s, n, per_call, resident) for s, n in schedule)
    return calls, lambda c: (c[0], c[1], self._put_batch(c[2], axis=1), c[3])

  def input_held(self) -> str:
    """What the host holds of the input at most: the calls in flight and the
    stream's own cache (its held shards), for the log."""
    mib = lambda n: f'{n / 2**20:,.1f} MiB'
    held = f'{self.PREFETCH + 2} calls of at most {mib(self.call_bytes)}'
    cached = self._method.stream.held_bytes
    return held + (f' + shards of {mib(cached)}' if cached is not None else '')

  def place(self, state):
    """The state on the mesh, committed there as the calls' outputs will be:
    an uncommitted first state made the second call compile all over again."""
    if self.multi:
      return parallel.replicate(state, self.mesh)
    return jax.device_put(state, self.mesh.devices.flat[0])

  def __call__(self, state, step: int):
    with profile.call_named(step):
      start = time.perf_counter()  # (not the training clock, which tests fake)
      with profile.named('input'):
        first, n, xs, budget = next(self.calls)
      waited = time.perf_counter() - start
      self.input_wait_seconds += waited
      assert first == step, (first, step)
      # A full call's length is the program's own where the lengths are static.
      length = n if self.static and self.mode != 'per step' and n == self._per_call else None
      state, stats = self._executable(state, n, xs, budget, length)(*self._args(state, n, xs))
    if self.multi and parallel.platform(self.mesh) == 'cpu':
      # XLA:CPU runs every device's program on one shared thread pool; with
      # asynchronous dispatch one device can start the next call while
      # another has not joined this one's collectives (parallel.py).
      jax.block_until_ready(state)
    return state, {**stats, 'input_wait_seconds': waited}, n

  def close(self):
    self.calls.close()
    if self._builders is not None:
      self._builders.shutdown(cancel_futures=True)

  def _call_input(self, stream, first: int, n: int, per_call: int, resident: bool):
    """(first, n, the call's N stacked ids, plans or batches, the packs' budget or None)."""
    if resident:  # the n steps' ids (one slice of the epoch order where there is one)
      xs = self._counted(np.asarray(stream.ids_block(first, n)))
      budget = stream.budget(xs)
    else:  # streamed batches, built on the host into the call's arrays
      xs = self._counted(streamed_call(stream, first, n, per_call, self.rows, self._builders))
      budget = None
    if self.planned:  # the n steps' only: the padding copies the first
      xs = stream.plan(xs, budget)
    return first, n, pad_leading(xs, per_call), budget

  # --- compilation ----------------------------------------------------------

  def _args(self, state, n: int, xs) -> tuple:
    return (state, xs) if self.mode == 'per step' else (state, self.table, xs, np.int32(n))

  def _executable(self, state, n: int, xs, budget: int | None, length: int | None = None):
    """The compiled call (ahead of time, for these arguments' shapes and
    placements: every call has the same), one per budget class (and `length`,
    the steps of a static-length program); the time it took is added to
    `compile_seconds`. Keyed by the inputs' shapes too (streamed batches may
    change them)."""
    key = (budget, length, tuple((a.shape, a.dtype) for a in jax.tree.leaves(xs)))
    if key not in self._executables:
      jax.block_until_ready(state)  # the calls before have run: what follows is compilation
      start = recorder.now()
      jitted = self.fn if self.mode == 'per step' else self._compiled(budget, length)
      self._executables[key] = jitted.lower(*self._args(state, n, xs)).compile()
      self.compile_seconds += recorder.now() - start
    return self._executables[key]

  def _compiled(self, budget: int | None, length: int | None = None):
    """The jitted call for packs of `budget` slots (packed streams;
    data/packing.py): one compilation per budget class, the base one nearly
    always (and per static `length`)."""
    if (budget, length) not in self._fns:
      stream = self._method.stream
      if not stream.resident:  # streamed: the call's batches come built
        gather = lambda table, batch: batch
      elif budget is None:
        gather = stream.gather
      else:
        gather = (stream.gather_planned if self.planned
                  else functools.partial(stream.gather, budget=budget))
        if budget != stream.base_budget:
          log.info('a batch needs %d non-zero slots a pack (base budget %d): compiling '
                   'a call for that', budget, stream.base_budget)
      self._fns[budget, length] = self._compile_many(self._method, gather, self._per_call,
                                                     self.gather_ahead and stream.resident, length)
    return self._fns[budget, length]

  def _compile_one(self, method: Method):
    if self.multi and method.local_step is not None:
      step = jax.shard_map(checked(method.local_step), mesh=self.mesh, in_specs=(P(), P(parallel.AXIS)),
                           out_specs=(P(), P()), check_vma=False)
      return jax.jit(step, donate_argnums=0, compiler_options=self.options)
    return jax.jit(checked(method.pure_step), donate_argnums=0, compiler_options=self.options,
                   **self._gspmd_shardings())

  def _compile_many(self, method: Method, gather, per_call: int, ahead: bool = False,
                    length: int | None = None):
    local = self.multi and method.local_step is not None
    step = checked(method.local_step if local else method.pure_step)

    def many(state, table, xs_N, num_steps):
      """The first `num_steps` of N steps (one compiled shape for every call):
      a loop of a traced length, so a short call costs its own steps only (a
      scan over N with the rest skipped by `cond` would copy the state on every
      skipped step); with a static `length` (a full call's: train.call_length),
      that many, a loop the compiler knows the length of. The last step's
      stats, with the call's first non-finite step. `ahead`: the N batches
      gathered first, in one vmapped pass (train.gather_ahead)."""
      count = num_steps if length is None else length
      if ahead:
        batches_N = jax.vmap(lambda x: gather(table, x))(xs_N)
        batch_of = lambda i: jax.tree.map(lambda a: a[i], batches_N)
      else:
        batch_of = lambda i: gather(table, jax.tree.map(lambda a: a[i], xs_N))

      def one(i, carry):
        state, last = carry
        state, stats = step(state, batch_of(i))
        bad = jnp.where(last['nonfinite_step'] >= 0, last['nonfinite_step'],
                        stats['nonfinite_step'])
        return state, {**stats, 'nonfinite_step': bad}

      x0 = jax.tree.map(lambda a: a[0], xs_N)
      zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                           jax.eval_shape(step, state, gather(table, x0))[1])
      zeros['nonfinite_step'] = jnp.full((), -1, jnp.int32)
      return jax.lax.fori_loop(0, count, one, (state, zeros))

    if local:  # each device runs its slice of every step's batch
      many = jax.shard_map(many, mesh=self.mesh, in_specs=(P(), P(), P(None, parallel.AXIS), P()),
                           out_specs=(P(), P()), check_vma=False)
      return jax.jit(many, donate_argnums=0, compiler_options=self.options)
    return jax.jit(many, donate_argnums=0, compiler_options=self.options,
                   **self._gspmd_shardings())

  def _gspmd_shardings(self) -> dict:
    if not self.multi:
      return {}
    return {'out_shardings': (parallel.replicated(self.mesh), parallel.replicated(self.mesh))}

  # --- transfers ------------------------------------------------------------

  def _counted(self, xs):
    self.call_bytes = max(self.call_bytes, sum(a.nbytes for a in jax.tree.leaves(xs)))
    return xs

  def _batch(self, stream, step: int):
    return stream.batch(step) if self.rows is None else stream.batch(step, rows=self.rows)

  def _replicate(self, table: dict):
    if self.multi:
      return parallel.replicate(table, self.mesh)
    return jax.device_put(table, self.mesh.devices.flat[0])

  def _put_batch(self, batch: dict, axis: int):
    if self.multi:
      return parallel.shard_batch(batch, self.mesh, axis, local=self.rows is not None)
    return jax.device_put(batch, self.mesh.devices.flat[0])


def streamed_call(stream, first: int, n: int, size: int, rows: tuple[int, int] | None = None,
                  pool: concurrent.futures.Executor | None = None):
  """Batches first … first + n − 1 of a streamed `stream`, stacked in one
  call's arrays of `size` ≥ n steps (the rest copies of the first, skipped
  inside the call): each built on `pool`'s threads straight into its step's
  slice (`stream.empty`, `batch(…, out=)`). Batches built apart and stacked
  after would copy the call a second time, on one thread: with the shards
  held, this builds a call 1.2–3.2 times as fast on 2 cores (docs/SCALE.md
  "A call built in place")."""
  start, stop = rows if rows is not None else (0, stream.batch_size)
  xs = stream.empty(size, stop - start)
  build = lambda i: stream.batch(first + i, rows, out=batching.step_view(xs, i))
  list(pool.map(build, range(n)) if pool is not None else map(build, range(n)))
  for a in jax.tree.leaves(xs):
    a[n:] = a[:1]
  return xs


def pad_leading(xs, size: int):
  """A call's n stacked steps (ids, plans or batches) padded along the
  leading axis to `size` with copies of the first (skipped inside the call:
  one compiled shape)."""
  return jax.tree.map(
      lambda a: np.concatenate([a, np.repeat(a[:1], size - len(a), axis=0)]) if len(a) < size
      else a, xs)


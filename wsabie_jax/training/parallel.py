"""Data parallelism: the batch sharded over a 'data' mesh axis, tables replicated.

Each device scores its slice of the batch — the B·K·D part of a step — and
takes gradients with respect to the rows it gathered. The touched rows and
their gradients are all-gathered (O(B·(K + nnz)·D) traffic, never a table)
and every replica applies the same row updates, so the replicas stay equal.
The draws are the single-device step's draws, sliced, so N devices give the
parameters one device gives for the same global batch.

Multi-host: call `initialize_distributed` first; each process then feeds its
slice of the global batch (`shard_batch`). What a host decides from its own
clock (the time budget's stop, the validation interval fitted to it) is
process 0's decision on every host (`agreed`): hosts that disagreed would
run different programs and wait on each other's collectives for ever.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from wsabie_jax.core import row_optim


AXIS = 'data'


def agreed(value: int) -> int:
  """Process 0's `value` on every process (itself on one process)."""
  if jax.process_count() == 1:
    return int(value)
  from jax.experimental import multihost_utils
  return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def initialize_distributed(coordinator_address: str, num_processes: int, process_id: int):
  """jax.distributed.initialize for multi-host runs (one process per host)."""
  jax.distributed.initialize(coordinator_address=coordinator_address,
                             num_processes=num_processes, process_id=process_id)


def make_mesh(num_devices: int = 0, devices=None) -> Mesh:
  """A 1-D mesh over the first `num_devices` of `devices` (default: jax.devices()).

  0 means all devices (all hosts) on accelerators, and one on CPU: several
  CPU "devices" are threads of one process sharing its cores (a test set-up).
  """
  devices = list(devices) if devices is not None else jax.devices()
  if num_devices == 0 and devices[0].platform == 'cpu':
    num_devices = 1
  if num_devices:
    if num_devices > len(devices):
      raise ValueError(f'asked for {num_devices} devices, only {len(devices)} exist')
    devices = devices[:num_devices]
  return Mesh(np.asarray(devices), (AXIS,))


def replicate(tree, mesh: Mesh):
  """Places a pytree (the TrainState) whole on every device of the mesh."""
  return jax.device_put(tree, replicated(mesh))


def shard_batch(batch, mesh: Mesh, axis: int = 0):
  """Places a global batch (a pytree, identical on every process) with its rows
  (along `axis`: 1 for a call's N×B stack of steps) split over the mesh."""
  sharding = NamedSharding(mesh, P(*[None] * axis, AXIS))
  size = mesh.devices.size
  for path, x in jax.tree_util.tree_leaves_with_path(batch):
    if x.shape[axis] % size:
      raise ValueError(f'batch size {x.shape[axis]} ({jax.tree_util.keystr(path)}) is not '
                       f'divisible by {size} devices')
  if jax.process_count() == 1:
    return jax.device_put(batch, sharding)
  n, i = jax.process_count(), jax.process_index()

  def local(v):
    rows = np.arange(i * v.shape[axis] // n, (i + 1) * v.shape[axis] // n)
    return jax.make_array_from_process_local_data(sharding, np.take(v, rows, axis))

  return jax.tree.map(local, batch)


def combine(grad):
  """One device's gradient for a table (inside shard_map) made every replica's:
  row pieces all-gathered (each replica applies all of them), per-row sums of
  a table read whole (wsabie/tables.py) summed."""
  if isinstance(grad, row_optim.DenseGrad):
    return row_optim.DenseGrad(jax.lax.psum(grad.grad_NxD, AXIS), jax.lax.psum(grad.sq_N, AXIS),
                               jax.lax.psum(grad.touched_N.astype(jnp.int32), AXIS) > 0)
  return jax.tree.map(lambda g: jax.lax.all_gather(g, AXIS, tiled=True), grad)


def make_sharded_step(local_step, mesh: Mesh):
  """jit of a per-device step under shard_map: the state replicated, the batch
  split over the mesh axis. `local_step` does its own collectives (all-gathers
  of touched rows, psums of stats) so every replica applies the same update."""
  # Replicated by construction (every replica applies the same all-gathered
  # updates; tests/parallel_test.py checks it), which the checker cannot infer
  # through the scatters.
  sharded = jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=(P(), P()),
                          check_vma=False)
  return _synchronous_on_cpu(jax.jit(sharded, donate_argnums=0), mesh)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def _synchronous_on_cpu(step, mesh: Mesh):
  if mesh.devices.flat[0].platform != 'cpu':
    return step

  def synchronous_step(state, batch):
    # XLA:CPU runs every device's program on one shared thread pool; with
    # asynchronous dispatch one device can start step t+1 while another has
    # not joined step t's collectives, and both wait forever on few cores.
    return jax.block_until_ready(step(state, batch))

  return synchronous_step

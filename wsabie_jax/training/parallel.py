"""Data parallelism: the batch sharded over a 'data' mesh axis, tables replicated.

Each device scores its slice of the batch — the B·K·D part of a step — and
takes gradients with respect to the rows it gathered. The touched rows and
their gradients are all-gathered (O(B·(K + nnz)·D) traffic, never a table)
and every replica applies the same row updates, so the replicas stay equal.
The draws are the single-device step's draws, sliced, so N devices give the
parameters one device gives for the same global batch.

Multi-host (training/hosts.py starts it): the mesh spans every process, each
process builds and feeds only its rows of the global batch (`local_rows`,
`shard_batch`) and places the replicated state from host memory (`replicate`). What a host decides from its own
clock (the time budget's stop, the validation interval fitted to it) is
process 0's decision on every host (`agreed`): hosts that disagreed would
run different programs and wait on each other's collectives for ever.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from wsabie_jax.config.schema import ConfigError
from wsabie_jax.core import row_optim


AXIS = 'data'


def agreed(value: int) -> int:
  """Process 0's `value` on every process (itself on one process)."""
  if jax.process_count() == 1:
    return int(value)
  from jax.experimental import multihost_utils
  return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def make_mesh(num_devices: int = 0, devices=None) -> Mesh:
  """A 1-D mesh over `num_devices` of `devices` (default: jax.devices(), every
  process's), with the same number from every process.

  0 means all devices (all hosts) on accelerators and with several processes,
  and one on a lone CPU process: its CPU "devices" are threads sharing its
  cores (a test set-up). With several processes a mesh must hold devices of
  every one of them (a process without any would run no step and wait on the
  others' collectives): `num_devices` is then split evenly over them.
  """
  devices = list(devices) if devices is not None else jax.devices()
  processes = sorted({d.process_index for d in devices})
  if len(processes) == 1 and num_devices == 0 and devices[0].platform == 'cpu':
    num_devices = 1
  if num_devices > len(devices):
    raise ConfigError(f'config.train.num_devices={num_devices}: only {len(devices)} '
                      f'device{"s" * (len(devices) > 1)} here ({len(processes)} '
                      f'process{"es" * (len(processes) > 1)}); 0 takes them all')
  if len(processes) > 1:
    devices = _from_every_process(devices, processes, num_devices)
  elif num_devices:
    devices = devices[:num_devices]
  return Mesh(np.asarray(devices), (AXIS,))


def _from_every_process(devices, processes, num_devices: int) -> list:
  """`num_devices` (0: all) devices, the same number from each process, in
  process order (a process's devices hold consecutive rows of the batch)."""
  if jax.process_count() != len(processes):
    raise ValueError(f'the devices given belong to processes {processes} of '
                     f'{jax.process_count()}: a mesh must span every process')
  mine = {p: [d for d in devices if d.process_index == p] for p in processes}
  least = min(len(v) for v in mine.values())
  each = least if num_devices == 0 else num_devices // len(processes)
  if num_devices % len(processes) or each > least or each == 0:
    raise ValueError(f'config.train.num_devices={num_devices} cannot be split evenly over '
                     f'{len(processes)} processes of {least}+ devices each: use 0 (all) or a '
                     f'multiple of {len(processes)} up to {least * len(processes)}')
  return [d for p in processes for d in mine[p][:each]]


def platform(mesh: Mesh) -> str:
  """The platform the mesh's devices are ('cpu', 'gpu', 'tpu')."""
  return mesh.devices.flat[0].platform


def local_devices(mesh: Mesh) -> list:
  """The mesh's devices this process drives."""
  return [d for d in mesh.devices.flat if d.process_index == jax.process_index()]


def local_rows(size: int) -> tuple[int, int]:
  """[start, stop) of this process's rows in a global batch of `size` split
  over the mesh (make_mesh orders devices by process: a contiguous block)."""
  n, i = jax.process_count(), jax.process_index()
  return i * size // n, (i + 1) * size // n


def replicate(tree, mesh: Mesh):
  """Places a pytree (the TrainState, a resident table) whole on every device
  of the mesh. With several processes each builds its own devices' copies
  from host memory (a state restored or made on a local device cannot be
  copied across hosts); every process holds the same values."""
  sharding = replicated(mesh)
  if jax.process_count() == 1:
    return jax.device_put(tree, sharding)

  def one(x):
    host = np.asarray(jax.device_get(x))
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

  return jax.tree.map(one, tree)


def shard_batch(batch, mesh: Mesh, axis: int = 0, local: bool = False):
  """Places a batch (a pytree) with its rows (along `axis`: 1 for a call's N×B
  stack of steps) split over the mesh. `batch` is the global batch (the same
  on every process; each keeps its rows), or with `local` this process's rows
  alone (`local_rows`: a process builds only the rows its devices train on)."""
  sharding = NamedSharding(mesh, P(*[None] * axis, AXIS))
  size = mesh.devices.size
  n = jax.process_count()
  for path, x in jax.tree_util.tree_leaves_with_path(batch):
    rows = x.shape[axis] * (n if local else 1)
    if rows % size:
      raise ValueError(f'batch size {rows} ({jax.tree_util.keystr(path)}) is not '
                       f'divisible by {size} devices')
  if n == 1:
    return jax.device_put(batch, sharding)

  def put(v):
    if not local:
      start, stop = local_rows(v.shape[axis])
      v = np.take(v, np.arange(start, stop), axis)
    return jax.make_array_from_process_local_data(sharding, v)

  return jax.tree.map(put, batch)


def combine(grad):
  """One device's gradient for a table (inside shard_map) made every replica's:
  row pieces (or an embedding's values and image gradients) all-gathered (each replica applies all of them), per-row sums of
  a table read whole (wsabie/table_reads.py) summed."""
  if isinstance(grad, row_optim.DenseGrad):
    return row_optim.DenseGrad(jax.lax.psum(grad.grad_NxD, AXIS), jax.lax.psum(grad.sq_N, AXIS),
                               jax.lax.psum(grad.touched_N.astype(jnp.int32), AXIS) > 0)
  if isinstance(grad, row_optim.EmbeddingPieces):  # pieces name this device's images
    grad = grad._replace(src_R=grad.src_R + jax.lax.axis_index(AXIS) * grad.g_SxD.shape[0])
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
  if platform(mesh) != 'cpu':
    return step

  def synchronous_step(state, batch):
    # XLA:CPU runs every device's program on one shared thread pool; with
    # asynchronous dispatch one device can start step t+1 while another has
    # not joined step t's collectives, and both wait forever on few cores.
    return jax.block_until_ready(step(state, batch))

  return synchronous_step


def memory_bytes(device) -> int:
  """What a device can hold: an accelerator's own memory, a CPU's the machine's RAM."""
  stats = device.memory_stats() if device.platform != 'cpu' else None
  if stats and stats.get('bytes_limit'):
    return int(stats['bytes_limit'])
  return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')


# The state is held about twice at a validation or a save (a host copy of the
# best, Orbax's staging), and a step's temporaries come on top.
STATE_COPIES = 2


def check_fits(state_shapes, device, what: str) -> None:
  """ConfigError when a state of `state_shapes` (jax.eval_shape of the
  method's init_state) cannot fit `device` STATE_COPIES times over, naming
  the largest arrays and the bytes: a label id of 2,000,000,000 or a
  feature id of 900,000,000 once allocated half a terabyte after the
  workdir was written."""
  leaves = jax.tree_util.tree_flatten_with_path(state_shapes)[0]
  sizes = sorted(((int(np.prod(x.shape)) * x.dtype.itemsize, jax.tree_util.keystr(p), x.shape)
                  for p, x in leaves), reverse=True)
  need, have = STATE_COPIES * sum(n for n, _, _ in sizes), memory_bytes(device)
  if need > have:
    largest = ', '.join(f'{name} {"×".join(map(str, shape))} ({n / 2**30:,.1f} GiB)'
                        for n, name, shape in sizes[:2])
    raise ConfigError(f'the model does not fit: {what}; its state needs {need / 2**30:,.1f} GiB '
                      f'({STATE_COPIES}× {largest}, ...), the {device.platform} device '
                      f'{have / 2**30:,.1f} GiB: check the data\'s largest ids, or lower '
                      'config.model.dim')


# Rows a batch may hold beyond the training rows (an epoch smaller than a
# batch: tiny sets, several epochs a step); past it a typo (1e8) allocates GBs.
MAX_BATCH_EPOCHS = 64


def check_batch(batch_size: int, num_rows: int) -> None:
  """ConfigError when a batch would hold over MAX_BATCH_EPOCHS epochs of `num_rows`."""
  if batch_size > MAX_BATCH_EPOCHS * max(num_rows, 1):
    raise ConfigError(f'config.train.batch_size={batch_size:,} is over {MAX_BATCH_EPOCHS}× the '
                      f'{num_rows:,} training rows (a step would be {batch_size // max(num_rows, 1):,} '
                      'epochs): lower it')

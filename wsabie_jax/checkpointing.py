"""Orbax checkpoints: the latest (for resume) and the best on validation.

Each checkpoint holds the TrainState (params, optimiser rows, RNG key, step)
and a JSON record of the loop: data position, best metric, patience, time.
"""
from __future__ import annotations

import pathlib

import jax
import orbax.checkpoint as ocp


class Checkpoints:

  def __init__(self, workdir, keep: int = 2):
    workdir = pathlib.Path(workdir).absolute()
    options = lambda n: ocp.CheckpointManagerOptions(max_to_keep=n, create=True)
    self.latest = ocp.CheckpointManager(workdir / 'checkpoints', options=options(keep))
    self.best = ocp.CheckpointManager(workdir / 'best', options=options(1))

  @staticmethod
  def save(manager: ocp.CheckpointManager, state, record: dict):
    step = int(jax.device_get(state.step))
    manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                               record=ocp.args.JsonSave(record)), force=True)

  @staticmethod
  def restore(manager: ocp.CheckpointManager, like_state):
    """(state, record) from the manager's newest step, or None when it is empty."""
    step = manager.latest_step()
    if step is None:
      return None
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like_state)
    got = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                        record=ocp.args.JsonRestore()))
    return type(like_state)(*got.state) if isinstance(got.state, (list, tuple)) else got.state, got.record

  def close(self):
    for m in (self.latest, self.best):
      m.wait_until_finished()
      m.close()

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
    def restore_as(tree):
      abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
      return manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract), record=ocp.args.JsonRestore()))

    try:
      got = restore_as(like_state)
    except ValueError as error:
      # Checkpoints written before TrainState grew a field (the adaptive
      # sampler) lack it: restore the fields they have, keep the rest empty.
      present = {k: v for k, v in like_state._asdict().items() if v is not None}
      if len(present) == len(like_state):
        raise
      try:
        got = restore_as(present)
      except ValueError:
        raise error from None  # the real mismatch (a shape, a dtype), not the fallback's
      return like_state._replace(**got.state), got.record
    return type(like_state)(*got.state) if isinstance(got.state, (list, tuple)) else got.state, got.record

  def close(self):
    for m in (self.latest, self.best):
      m.wait_until_finished()
      m.close()

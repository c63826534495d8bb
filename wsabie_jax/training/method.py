"""What the training loop needs from a method: plain data, no class hierarchy.

Each method (wsabie_jax/methods/) builds one of these from a config; the loop
in loop.py is the same for all of them and imports none.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Method(NamedTuple):
  init_state: Callable[[], Any]
  stream: Any                            # .batch(step), .num_examples, .position(step);
                                         # .ids/.table/.gather where it fits on the devices
  # The step as a pure function (state, batch) -> (state, stats) over the whole
  # batch; the loop compiles it (dispatch.py), XLA partitions it over a mesh.
  pure_step: Callable
  mesh: Any                              # the devices it trains on (jax.sharding.Mesh)
  validate: Callable[[Any], dict | None]  # state -> validation metrics (None: no valid split)
  test: Callable[[Any, Any], dict]       # (best state, workdir) -> test metrics
  select_metrics: frozenset              # what config.train.select_metric may name
  vocabulary: dict                       # the workdir's vocabulary.json
  description: str                       # the data, for the log
  # The config it was built from, with the values fitted to the data in place
  # of 'auto' (wsabie/fitting.py): what the run's config.json records.
  config: Any
  # A per-device step with its own collectives over parallel.AXIS, run under
  # shard_map when the mesh has several devices (None: pure_step, partitioned).
  local_step: Callable | None = None

"""What the training loop needs from a method: plain data, no class hierarchy.

Each method (wsabie_jax/methods/) builds one of these from a config; the loop
in loop.py is the same for all of them and imports none.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Method(NamedTuple):
  init_state: Callable[[], Any]
  place: Callable[[Any], Any]            # a (restored) state onto the devices
  stream: Any                            # .batch(step), .num_examples, .position(step)
  train_step: Callable                   # (state, batch) -> (state, stats), jitted
  put: Callable                          # a host batch onto the devices
  validate: Callable[[Any], dict | None]  # state -> validation metrics (None: no valid split)
  test: Callable[[Any, Any], dict]       # (best state, workdir) -> test metrics
  select_metrics: frozenset              # what config.train.select_metric may name
  vocabulary: dict                       # the workdir's vocabulary.json
  description: str                       # the data, for the log
  # The step as a pure function (state, batch) -> (state, stats), for many steps
  # per dispatch on a device-resident stream (None: one dispatch a step).
  pure_step: Callable | None = None

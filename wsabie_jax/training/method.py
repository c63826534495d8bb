"""What the training loop needs from a method: plain data, no class hierarchy.

Each method (wsabie_jax/methods/) builds one of these from a config; the loop
in loop.py is the same for all of them and imports none. Its training data
is a Stream: resident (held whole on the devices, a call gathering its rows
by id) or streamed (each step's batch built on the host).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Stream(Protocol):
  """The training data, batch by batch; a pure function of (seed, step)."""
  resident: bool                # True: also a ResidentStream
  num_examples: int             # rows an epoch
  pairs_per_row: float          # (image, label) pairs a row holds on average
  held_bytes: int | None        # what a streamed set caches on the host (None: nothing)

  def batch(self, step: int) -> Any: ...            # step's batch (a pytree), built on the host
  def position(self, step: int) -> dict: ...        # {'epoch', …}: where step is, for the record


@runtime_checkable
class ResidentStream(Stream, Protocol):
  """Data held whole on the devices: a call of n steps takes their ids (n×B…)
  and gathers each step's batch on the device. Packed streams (`plans`) may
  plan the packs on the host (`plan`, `gather_planned`, `base_budget`)."""
  plans: bool

  def table(self) -> dict: ...                                  # arrays put on the devices once
  def ids_block(self, first: int, n: int) -> np.ndarray: ...    # n steps' ids
  def budget(self, ids: np.ndarray) -> int | None: ...          # packed slots a call needs
  def gather(self, table: dict, ids, *args, **kwargs) -> Any: ...  # one step's batch, traced


PLANNING = ('plan', 'gather_planned', 'base_budget')  # what a stream with `plans` also has


class RefitWork(NamedTuple):
  """Work a refit (train.refit) does besides its steps, held in the time budget with them."""
  seconds: Callable[[], float]       # its cost, estimated before the refit's steps
  run: Callable[[Any], None]         # (the best state on validation): done after them
  # (the best state on validation): work done before the refit is decided on,
  # its seconds spent by then (what is chosen on validation, kept for the test)
  before: Callable[[Any], None] = lambda best: None
  # how many evaluations of the validation split `before` makes (the member's
  # choice), held in the budget with the refit at a validation's seconds each
  evaluations: int = 0


NO_REFIT_WORK = RefitWork(lambda: 0.0, lambda best: None)


class Method(NamedTuple):
  # The initial state: a NamedTuple with `step` (i32[]) and `rate_scale` (f32[],
  # every learning rate's multiplier, which the loop sets: train.plateau_drops).
  init_state: Callable[[], Any]
  stream: Stream
  # The step as a pure function (state, batch) -> (state, stats) over the whole
  # batch; the loop compiles it (dispatch.py), XLA partitions it over a mesh.
  pure_step: Callable
  mesh: Any                              # the devices it trains on (jax.sharding.Mesh)
  validate: Callable[[Any], dict | None]  # state -> validation metrics (None: no valid split)
  # (tested state, workdir, best on validation) -> test metrics; the tested state is
  # the refit (train.refit) or the best, which choices made on validation read.
  test: Callable[[Any, Any, Any], dict]
  select_metrics: frozenset              # what config.train.select_metric may name
  vocabulary: dict                       # the workdir's vocabulary.json
  description: str                       # the data, for the log
  # The config it was built from, with the values fitted to the data in place
  # of 'auto' (wsabie/fitting.py): what the run's config.json records.
  config: Any
  # A per-device step with its own collectives over parallel.AXIS, run under
  # shard_map when the mesh has several devices (None: pure_step, partitioned).
  local_step: Callable | None = None
  # Work before the steps, its seconds charged to train.max_seconds: a fresh run
  # calls it once at the start, a resumed one again uncharged (None: nothing).
  prepare: Callable[[], float] | None = None
  # What a refit does besides its steps (WSABIE: the chosen member trained again
  # on the whole file), its seconds charged with the refit's (NO_REFIT_WORK: nothing).
  refit_work: RefitWork = NO_REFIT_WORK

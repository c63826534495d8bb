"""The seconds a run of ours needs to reach a test p@1 (the panel's last
column, launch/benchmark.py --suite=panel): the run trained as the config's
runs are, paused on a grid fine where the peer is quick (`pause_times`), the
test file scored at each pause off the clock, and the run each pause stands
for charged its members' seconds as well as its steps' (`seconds_to`).
"""
from __future__ import annotations

import time

from wsabie_jax.benchmarks import timed
from wsabie_jax.core import evaluation
from wsabie_jax.data import batching, load_splits
from wsabie_jax.wsabie import linear_member, neighbours

KS = (1, 5)  # the metrics each scoring reads (the validation choice's, train.select_metric, among them)
REACH_AT = 60.0      # LightFM's p@1 at this budget is the target …
REACH_WITHIN = 30.0  # … ours is trained towards for at most this long
REACH_EVERY = 1.0    # seconds of steps between test scorings (off the clock) …
REACH_FINE = 32      # … or this many up to `fine_until` (twice a peer's seconds) …
REACH_FINEST = 0.01  # … at most this often


def pause_times(every: float, fine_until: float = 0.0):
  """The next scoring's seconds after the last's: every `every`, but up to
  `fine_until` every max(REACH_FINEST, fine_until / REACH_FINE). Where the
  peer trains in 0.3 s, a 1-s grid could only read ours' reach as 1 s or
  more (yeast: 1.1 s on it, 0.19-0.26 s on the fine one)."""
  fine = max(REACH_FINEST, fine_until / REACH_FINE)
  return lambda last: last + (fine if last + fine <= fine_until * (1 + 1e-9) else every)


def seconds_to(cfg, config, padded_test, target: float, within: float = REACH_WITHIN,
               every: float = REACH_EVERY, clock=time.perf_counter,
               fine_until: float = 0.0, ensemble_at=None) -> float | None:
  """The seconds (compilation and scoring left out) a run of ours needs to
  reach test p@1 ≥ `target`: its steps, scored at `pause_times(every,
  fine_until)` up to `within`, and the linear members it trains before them
  (model.ensemble). Trained as the config's runs are (its training file less
  the validation split); the test file only scores. A run of budget B trains
  the members `ensemble_at(B)` names (model.ensemble as a run of that budget
  fits it: `ensemble_at`; None: config.model.ensemble at any budget), so the
  run a pause after t seconds of steps stands for is the one whose members
  P = ensemble_at(t + their seconds): its reach t + their seconds. Each
  scoring weighs the members on the validation split as a run does, and the
  neighbours' votes (model.neighbours) after them."""
  train, valid, _ = load_splits(config.data)
  reached = []
  k = config.model.neighbours if valid.num_images else 0
  at = ensemble_at or (lambda budget: config.model.ensemble)
  kinds = linear_member.members(at(0.0)) if valid.num_images else ()  # (0: no budget, every one)
  members, seconds = {}, {}
  padded_valid = batching.pad_images(valid) if valid.num_images else None
  if kinds:
    # Trained once off the clock first: their compilation is left out as the
    # steps' is (the timed training is the same, programs compiled).
    linear_member.train_members('+'.join(kinds), train, config.model, config.seed)
    for kind in kinds:
      start = clock()
      members[kind] = linear_member.train(kind, train, config.model, config.seed)
      seconds[kind] = clock() - start

  def run_after(steps_seconds: float) -> tuple[tuple[str, ...], float]:
    """(its members, its budget) of the run whose steps take `steps_seconds`:
    the least P with ensemble_at(steps + P's seconds) = P, from P = ensemble_at(steps) up
    (a larger budget trains no fewer members)."""
    members_at = lambda budget: linear_member.members(at(budget)) if kinds else ()
    kinds_ = members_at(steps_seconds)
    while True:
      budget = steps_seconds + sum(seconds[kind] for kind in kinds_)
      if members_at(budget) == kinds_:
        return kinds_, budget
      kinds_ = members_at(budget)

  def score(params, pairs, steps_seconds):
    kinds_, budget = run_after(steps_seconds)
    if not kinds_ and not k:
      p1 = evaluation.evaluate_params(params, padded_test, ks=KS)['p@1']
    else:
      own = (lambda i, v: evaluation.embed(params.V_dxD, i, v)), params.W_YxD
      eval_kw = {'ks': KS, 'limit': config.train.eval_subset}
      trained = {kind: members[kind] for kind in kinds_}
      kind, weight, _ = linear_member.choose(own, trained, padded_valid,
                                             config.train.select_metric, eval_kw)
      got = linear_member.combined(own, trained.get(kind), weight)
      if k:  # (the votes' index and choice are scoring's work: off the clock, as validation is)
        near = neighbours.index(params.V_dxD, train)
        mu, _ = neighbours.choose(got, own[0], near, k, padded_valid,
                                  config.train.select_metric, eval_kw)
        got = neighbours.combined(got, own[0], near, k, mu)
      p1 = evaluation.evaluate_ranking(*got, padded_test, ks=KS)['p@1']
    if p1 >= target:  # (a later pause's run has no fewer members: its budget is no smaller)
      reached.append(budget)
    return bool(reached)  # (reached: training ends)

  timed.train_ours(train, cfg, config.train.batch_size, within,
                   positives_per_row=config.train.positives_per_row, on_pause=score,
                   pause_every_seconds=pause_times(every, fine_until))
  return reached[0] if reached else None

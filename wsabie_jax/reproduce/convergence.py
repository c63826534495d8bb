"""Convergence speed from a run's validation history (workdir/history.jsonl).

Paper 003 Table 4 compares training time; here "time" is the seconds spent in
training steps (validation, checkpoints and compilation left out) until the
validation metric first reaches a fraction of a target.
"""
from __future__ import annotations

import json
import math
import pathlib


def read_history(workdir) -> list[dict]:
  path = pathlib.Path(workdir) / 'history.jsonl'
  if not path.exists():
    raise FileNotFoundError(f'{path}: no validation history (did the run validate?)')
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def best(history: list[dict], metric: str) -> float:
  return max(entry[metric] for entry in history)


def time_to_reach(history: list[dict], metric: str, target: float) -> float:
  """Step seconds at the first validation with metric ≥ target (inf if never)."""
  for entry in history:
    if entry[metric] >= target:
      return entry['step_seconds']
  return math.inf


def compare(histories: dict[str, list[dict]], reference: str, metric: str = 'p@5',
            fraction: float = 0.95) -> dict[str, dict]:
  """Per run: its best, the time to `fraction` of its own best and of the
  reference run's best, and the reference's times over each (speed-ups)."""
  ref_best = best(histories[reference], metric)
  ref_own = time_to_reach(histories[reference], metric, fraction * ref_best)
  out = {}
  for name, history in histories.items():
    own = time_to_reach(history, metric, fraction * best(history, metric))
    common = time_to_reach(history, metric, fraction * ref_best)
    out[name] = {'best': best(history, metric), 'time_to_own': own, 'time_to_reference': common,
                 'speedup_own': ref_own / own if own > 0 else math.inf,
                 'speedup_reference': ref_own / common if common > 0 else math.inf}
  return out

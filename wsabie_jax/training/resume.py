"""What a resumed run says: where it was (the resume line's account of its
record), and whether it goes on (a raised budget) or has nothing to train."""
from __future__ import annotations

import logging

from wsabie_jax.training import settings
from wsabie_jax.training.recorder import RunRecord, Stop

log = logging.getLogger('wsabie_jax')


def account(saved: dict, metric: str) -> str:
  """The resume line's account of a record, rounded: 'best p@1 0.623 at step
  1800; 27.5 s trained; 1 rate drop'."""
  r = RunRecord.of(saved)
  parts = [f'best {metric} {r.best_metric:.4g} at step {r.best_step}' if r.best_step >= 0
           else 'not validated yet', f'{r.train_seconds:.1f} s trained']
  if r.rate_drops:
    parts.append(f'{r.rate_drops} rate drop{"s" * (r.rate_drops > 1)}')
  if r.stopped:
    parts.append(f'had stopped: {r.stopped}')
  return '; '.join(parts)


def go_on_or_say(train, step: int, r: RunRecord, total: int) -> None:
  """A resumed run that had spent its time budget goes on when the budget was
  raised or lifted; one with no step left to take says so, and what would let
  it go on (a raised max_seconds once trained 0 steps without a word)."""
  if r.stopped == Stop.MAX_SECONDS and (not train.max_seconds
                                        or r.train_seconds < train.max_seconds):
    r.stopped = Stop.NONE
  if r.stopped == Stop.MAX_SECONDS:
    log.warning('nothing to train: the run spent its budget (%.1f s of train.max_seconds=%g); '
                'raise it to train on', r.train_seconds, train.max_seconds)
  elif r.stopped == Stop.EARLY_STOPPING:
    log.warning('nothing to train: the run stopped early at step %d (patience ran out); '
                '--force_new starts a new run', step)
  elif step >= total:
    cap = (f'train.max_steps={train.max_steps}' if train.max_steps
           else f'train.num_epochs={settings.epochs_cap(train)}')
    log.warning('nothing to train: the run is at step %d, the end %s sets; raise it to train on',
                step, cap)

"""A progress line with examples/s: redrawn in place on a terminal, else a
line every `every_seconds`. On a terminal, log records clear the line before
they print (no log text glued to a half-drawn bar), and it is redrawn at the
next update."""
from __future__ import annotations

import logging
import sys
import time


class Progress:

  MIN_SECONDS = 0.5  # of work before a rate and an ETA are shown

  def __init__(self, total_steps: int, examples_per_step: int, stream=sys.stderr,
               every_seconds: float = 10.0, unit: str = 'ex', step_name: str = 'step',
               budget_seconds: float = 0.0, may_stop_early: bool = False,
               clock=time.perf_counter, work_clock=None):
    """budget_seconds > 0: a time budget (train.max_seconds left) that may end
    the run before total_steps; the bar and ETA follow whichever ends first.
    may_stop_early: early stopping may end it sooner still, so the total and
    the ETA read as bounds (`/≤44,700`, `eta ≤ 3:05`). stream None: draws
    nothing (a process other than the one that reports). work_clock (default
    `clock`): the seconds the rate divides by — a training run's step time,
    less validation, checkpoints and compiling, as its final line's rate."""
    self.bound = '≤' if may_stop_early else ''
    self.clock, self.work_clock = clock, work_clock or clock
    self.total, self.per_step, self.stream = total_steps, examples_per_step, stream
    self.budget, self.created = budget_seconds, self.clock()
    self.unit, self.step_name = unit, step_name
    self.tty = stream is not None and stream.isatty()
    self.every = 0.2 if self.tty else every_seconds
    self.start = self.last_print = self.clock()
    self.first_step = None
    self.why = ''  # why the run ended before its total (`finish`)
    self.handlers = list(logging.getLogger().handlers) if self.tty else []
    self._last_record = None
    for h in self.handlers:  # the root's handlers: absl's writes to the same terminal
      h.addFilter(self._clear_line)

  def update(self, step: int, **scalars):
    if self.stream is None:
      return
    now = self.clock()
    if self.first_step is None:
      self.first_step, self.start, self.work_start = step, now, self.work_clock()
      return
    if self.last_print and now - self.last_print < self.every and step < self.total:
      return
    self.last_print = now
    rate = (step - self.first_step) * self.per_step / max(self.work_clock() - self.work_start,
                                                          1e-9)
    frac = step / max(self.total, 1)
    eta = (self.total - step) * self.per_step / max(rate, 1e-9)
    of_total = f'/{self.bound}{self.total:,}'
    if self.budget and self.budget - (now - self.created) < eta:  # the clock ends it first
      eta = max(self.budget - (now - self.created), 0.0)
      frac, of_total = min((now - self.created) / self.budget, 1.0), ''
    bar = '#' * int(20 * frac) + '.' * (20 - int(20 * frac))
    extra = ' '.join(f'{k} {v:.4g}' for k, v in scalars.items())
    # A rate over a moment's work is noise (a phase of instant items read as
    # millions a second): shown once MIN_SECONDS have passed.
    timed = now - self.start >= self.MIN_SECONDS
    speed = f'{rate:,.0f} {self.unit}/s ' if timed else ''
    until = f'eta {self.bound}{int(eta) // 60}:{int(eta) % 60:02d} ' if timed else ''
    line = (f'{self.step_name} {step:,}{of_total} [{bar}] {100 * frac:3.0f}% {speed}{until}'
            f'{extra}').rstrip() + (f' (stopped: {self.why})' if self.why else '')
    self.stream.write(('\r' + line + '\x1b[K') if self.tty else line + '\n')
    self.stream.flush()

  def finish(self, step: int, why: str = '') -> None:
    """The last line, drawn whatever the interval: the step the run ended at
    and, where it ended before its total, why (a bar left at 51% reads as a
    run that died)."""
    if self.stream is None or self.first_step is None:
      return
    self.last_print, self.why = 0.0, why.replace('_', ' ')
    self.update(step)

  def _clear_line(self, record) -> bool:
    """A logging filter: wipes the progress line before the record prints."""
    if record is self._last_record:  # one record, several handlers
      return True
    self._last_record = record
    self.stream.write('\r\x1b[K')
    self.last_print = 0.0  # redraw at the next update
    return True

  def close(self):
    for h in self.handlers:
      h.removeFilter(self._clear_line)
    if self.tty:
      self.stream.write('\n')

"""The progress line: bounds where early stopping may end a run, no rate
before there is one to read. A fake clock: the same lines on any machine."""
import io

from tests import helpers
from wsabie_jax.training.progress import Progress


def _lines(**kw):
  out, clock = io.StringIO(), helpers.FakeClock()
  progress = Progress(44_700, 100, stream=out, every_seconds=0.0, clock=clock, **kw)
  progress.update(0)
  clock.advance(0.1)
  progress.update(10)  # 0.1 s in: no rate yet
  clock.advance(1.9)
  progress.update(1000)  # 1,000 steps of 100 in 2 s: 50,000 ex/s, 43,700 steps to go
  return out.getvalue().splitlines()


def test_early_stopping_makes_the_total_and_eta_bounds():
  early, plain = _lines(may_stop_early=True), _lines()
  assert early[-1].startswith('step 1,000/≤44,700 [') and 'eta ≤1:27' in early[-1], early
  assert plain[-1].startswith('step 1,000/44,700 [') and 'eta 1:27' in plain[-1], plain
  assert '50,000 ex/s' in plain[-1]


def test_no_rate_before_half_a_second_of_work():
  first = _lines()[0]
  assert first == 'step 10/44,700 [....................]   0%', first


def test_the_rate_divides_by_the_steps_time_as_the_final_line_does():
  """A validation between two updates takes wall time but no step time: the
  bar's rate is the run's final pairs/s, not the wall clock's."""
  out, wall = io.StringIO(), helpers.FakeClock()
  steps_time = [0.0]
  progress = Progress(10_000, 100, stream=out, every_seconds=0.0, clock=wall,
                      work_clock=lambda: steps_time[0])
  progress.update(0)
  wall.advance(30.0)       # 1 s of steps and 29 s of validation
  steps_time[0] += 1.0
  progress.update(500)     # 500 steps of 100 in 1 s of steps
  assert '50,000 ex/s' in out.getvalue().splitlines()[-1], out.getvalue()


def test_the_last_line_says_where_and_why_a_run_ended_early():
  """The bar is drawn once more when the run ends, whatever the interval:
  at the step reached, with the reason where it is short of its total."""
  out, clock = io.StringIO(), helpers.FakeClock()
  progress = Progress(10_000, 100, stream=out, every_seconds=60.0, clock=clock,
                      may_stop_early=True)
  progress.update(0)
  clock.advance(1.0)
  progress.update(100)      # drawn (the first line after the start)
  clock.advance(1.0)
  progress.update(5_100)    # within the interval: not drawn
  progress.finish(5_100, 'early_stopping')
  last = out.getvalue().splitlines()[-1]
  assert last.startswith('step 5,100/≤10,000 [##########..........]  51%'), last
  assert last.endswith('(stopped: early stopping)'), last

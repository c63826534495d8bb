"""The schedule a run follows (training/loop.py), pinned in the fast tier
against a scripted sequence of validations: when the rate drops and by how
much, which state is best (the first of equals), which one a drop goes back
to, that the step count goes on, and which step a call names as the first
non-finite one. The steps are real (a tiny config); the validations are not,
so the course is the same on any machine."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.train_test import _latest_state, _tiny_config
from wsabie_jax import methods
from wsabie_jax.training import loop

# Validation i (every 4 steps) reads SCRIPT[i]: patience 2, 2 drops ÷10.
SCRIPT = [0.10, 0.30, 0.30,  # best at step 8; the tie at 12 is not a new best
          0.20,              # 2 without a better one: drop 1, back to step 8's state, rate 0.1
          0.25, 0.40,        # best at step 24
          0.10, 0.10,        # drop 2: back to step 24's state, rate 0.01
          0.10, 0.10]        # patience out, no drop left: the run stops at step 40


def _scripted_run(tmp_path):
  seen, restored = [], []

  def build(config, mesh):
    method = methods.build(config, mesh)

    def validate(state):
      seen.append((int(state.step), float(state.rate_scale), loop.checksum(state.params)))
      p = SCRIPT[len(seen) - 1]
      return {'p@1': p, 'map': p}

    return method._replace(validate=validate)

  back_to_best = loop._back_to_best

  def dropped(call, *args):
    state = back_to_best(call, *args)
    restored.append((int(state.step), float(state.rate_scale), loop.checksum(state.params)))
    return state

  config = _tiny_config(max_steps=200, eval_every_steps=4, checkpoint_every_steps=4, patience=2,
                        plateau_drops=2, plateau_factor=10.0, max_seconds=0.0,
                        evals_per_budget=0)
  methods.check(config)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(loop, '_back_to_best', dropped)
    metrics = loop.train_and_evaluate(config, tmp_path, build)
  return metrics, seen, restored


def test_the_schedule_follows_the_scripted_validations(tmp_path):
  metrics, seen, restored = _scripted_run(tmp_path)
  steps = [s for s, _, _ in seen]
  assert steps == list(range(4, 44, 4))  # the count goes on through each drop
  rates = [r for _, r, _ in seen]
  assert rates == pytest.approx([1.0] * 4 + [0.1] * 4 + [0.01] * 2)  # ÷ plateau_factor
  params_at = {s: c for s, _, c in seen}
  # Each drop goes back to the best (the first of equals, not the tie at 12;
  # the newest best, not the one before it), at the lowered rate, its step going on.
  assert restored == [(16, pytest.approx(0.1), params_at[8]),
                      (32, pytest.approx(0.01), params_at[24])]
  assert (metrics['stopped'], metrics['rate_drops'], metrics['best_step'], metrics['steps']) == (
      'early_stopping', 2, 24, 40)
  assert metrics['valid_p@1'] == 0.40


def test_a_non_finite_step_stops_the_run_naming_the_calls_first(tmp_path):
  """A NaN model must not train on, log loss 0.0 and report p@1 3.526
  (exit 0). W turns NaN from the 10th step on: the call of steps 9–12 (4 a
  call) names step 11 (the first to read W after it turned), not 12; the
  last good checkpoint (step 8) is kept, nothing NaN is saved, no
  metrics.json is written and the lock is released."""
  def build(config, mesh):
    method = methods.build(config, mesh)

    def poisoned(state, batch):
      state, stats = method.pure_step(state, batch)
      W = jnp.where(state.step >= 10, jnp.nan, state.params.W_YxD)
      return state._replace(params=state.params._replace(W_YxD=W)), stats

    return method._replace(pure_step=poisoned)

  config = _tiny_config(max_steps=40, eval_every_steps=4, checkpoint_every_steps=4,
                        patience=100, steps_per_call=4)
  methods.check(config)
  with pytest.raises(loop.Diverged, match=r'non-finite values \(NaN or inf\) at step 11; .*'
                                         r'The last good checkpoint, step 8, is kept'):
    loop.train_and_evaluate(config, tmp_path, build)
  state, _ = _latest_state(tmp_path, config)
  assert int(state.step) == 8 and all(np.isfinite(x).all() for x in jax.tree.leaves(state.params))
  assert not (tmp_path / 'metrics.json').exists()
  assert (tmp_path / 'LOCK').read_text() == ''

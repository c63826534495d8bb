"""The per-pair weights of each WARP objective against hand-computed values
(issue 39): known scores, so known violators, and a known proposal q.

Y = 10 labels, 2 positives: 8 negatives. The positive scores 1.0 and the
margin is 1, so a draw violates when its score is above 0 (Alg. 1 l. 11).
L(k) = H_k, the harmonic weights of eq. (5) with α_j = 1/j.
"""
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.wsabie import objective, warp

Y, NUM_NEG = 10, 8
H = lambda k: float(np.sum(1.0 / np.arange(1, k + 1)))


def _weights(weigher, scores, *, proposal=None, num_negatives=NUM_NEG, **loss):
  cfg = helpers.step_config(Y, num_draws=len(scores), **loss)
  K = len(scores)
  ids, w, (found, trials) = weigher(
      cfg, jnp.float32(1.0), jnp.asarray(scores, jnp.float32), jnp.int32(num_negatives),
      jnp.ones(K, bool), jnp.asarray(proposal if proposal is not None else np.full(K, 1 / NUM_NEG),
                                     jnp.float32))
  out = np.zeros(K)
  np.add.at(out, np.asarray(ids), np.asarray(w))
  return out, bool(found), int(trials)


# Draws 1, 3 and 4 violate (scores above 0); draw 0 and 2 do not.
SCORES = [-0.5, 0.5, -0.2, 0.2, 0.9]


def test_first_violator_is_weighted_by_its_position():
  """N = 2 (the second draw), rank ⌊8/2⌋ = 4, weight H_4 on that draw only."""
  w, found, trials = _weights(objective.first_violator, SCORES, violators='first',
                              rank_estimate='first_violator')
  np.testing.assert_allclose(w, [0, H(4), 0, 0, 0], rtol=1e-6)
  assert found and trials == 2


def test_every_violator_shares_the_weight_of_the_estimated_rank():
  """v = 3 of K = 5: rank ⌊8·3/5⌋ = 4 (violator count), H_4/3 on each violator;
  with the first-violator estimate, rank 4 again (N = 2) — so also a case
  where they differ: draws 0, 1 violate of 5 → count ⌊8·2/5⌋ = 3, first ⌊8/1⌋ = 8."""
  w, _, _ = _weights(objective.every_violator, SCORES, violators='all',
                     rank_estimate='violator_count')
  np.testing.assert_allclose(w, [0, H(4) / 3, 0, H(4) / 3, H(4) / 3], rtol=1e-6)
  two = [0.3, 0.1, -1.0, -1.0, -1.0]
  w, _, _ = _weights(objective.every_violator, two, violators='all',
                     rank_estimate='violator_count')
  np.testing.assert_allclose(w, [H(3) / 2, H(3) / 2, 0, 0, 0], rtol=1e-6)
  w, _, _ = _weights(objective.every_violator, two, violators='all',
                     rank_estimate='first_violator')
  np.testing.assert_allclose(w, [H(8) / 2, H(8) / 2, 0, 0, 0], rtol=1e-6)


def test_no_violator_gives_no_weight():
  for weigher, loss in ((objective.first_violator, {}),
                        (objective.every_violator, dict(violators='all')),
                        (objective.importance_weighted, dict(violators='all'))):
    w, found, trials = _weights(weigher, [-0.1, -2.0, -0.5], **loss)
    assert not found and trials == 4 and not w.any()


def test_importance_weights_follow_one_over_q():
  """Violators 1, 3, 4 with q = 0.2, 0.05, 0.4: Σ 1/q = 5 + 20 + 2.5 = 27.5,
  r̂ = ⌊27.5/5⌋ = 5, and each violator carries H_5·(1/q_k)/27.5."""
  q = [0.1, 0.2, 0.3, 0.05, 0.4]
  w, _, _ = _weights(objective.importance_weighted, SCORES, proposal=q, violators='all',
                     rank_estimate='violator_count')
  np.testing.assert_allclose(w, H(5) * np.array([0, 5, 0, 20, 2.5]) / 27.5, rtol=1e-6)


def test_importance_rank_is_clipped_to_the_negatives():
  """A tiny q makes Σ 1/q / K = 1,000 ≫ 8: r̂ is clipped to Y − |P| = 8."""
  q = [0.1, 0.001, 0.3, 0.05, 0.4]
  weight, per_draw = warp.importance_weight(jnp.asarray([0, 1, 0, 1, 1], bool),
                                            jnp.asarray(q, jnp.float32), jnp.int32(NUM_NEG),
                                            num_labels=Y)
  assert float(weight) == pytest.approx(H(8), rel=1e-6)
  np.testing.assert_allclose(per_draw, H(8) * np.array([0, 1000, 0, 20, 2.5]) / 1022.5,
                             rtol=1e-5)


def test_a_budget_larger_than_the_negatives():
  """K = 6 draws, Y − |P| = 3 negatives (Alg. 1 stops after 3 trials): draws
  3–5 never count, and the violator count is over the 3 that do: draws 0, 2
  violate → rank ⌊3·2/3⌋ = 2; the first violator's ⌊3/1⌋ = 3; importance
  weights with q uniform on the 3 negatives agree with the count (r̂ = 2)."""
  scores = [0.5, -1.0, 0.4, 0.9, 0.9, 0.9]  # draws 3–5 would violate if counted
  w, _, trials = _weights(objective.first_violator, scores, num_negatives=3)
  np.testing.assert_allclose(w, [H(3), 0, 0, 0, 0, 0], rtol=1e-6)
  assert trials == 1
  w, _, _ = _weights(objective.every_violator, scores, num_negatives=3, violators='all',
                     rank_estimate='violator_count')
  np.testing.assert_allclose(w, [H(2) / 2, 0, H(2) / 2, 0, 0, 0], rtol=1e-6)
  w, _, _ = _weights(objective.importance_weighted, scores, num_negatives=3,
                     proposal=np.full(6, 1 / 3), violators='all', rank_estimate='violator_count')
  np.testing.assert_allclose(w, [H(2) / 2, 0, H(2) / 2, 0, 0, 0], rtol=1e-6)
  none = [-1.0, -1.0, -1.0, 0.9, 0.9, 0.9]  # violators only past the negatives: none
  w, found, _ = _weights(objective.every_violator, none, num_negatives=3, violators='all')
  assert not found and not w.any()


def test_auc_takes_the_first_valid_draw_not_the_first_violator():
  """Draw 0 does not violate: AUC's plain hinge counts nothing for this pair
  (weight 0 at draw 0), where WARP's first violator is draw 1."""
  w, found, trials = _weights(objective.first_valid_draw, SCORES, loss='auc')
  assert not found and trials == 1 and not w.any()
  w, found, trials = _weights(objective.first_valid_draw, SCORES[1:], loss='auc')
  np.testing.assert_allclose(w, [1, 0, 0, 0])
  assert found


def test_sampler_speed_ups_over_seeds_are_summarised():
  """compare_samplers --seeds: each row's speed-up to WARP's 95% over the
  seeds that reached it (median, range), test p@5 and pairs/s medians."""
  from wsabie_jax.reproduce import sampler_tables
  inf = float('inf')
  row = lambda up, t, p5, rate: ({'speedup_reference': up, 'time_to_reference': t},
                                 {'p@5': p5}, rate)
  runs = {s: tuple({name: r[i] for name, r in rows.items()} for i in range(3))
          for s, rows in {
              0: {'warp': row(1.0, 3.0, 0.16, 100.0), 'vse_warp': row(1.8, 1.7, 0.17, 80.0)},
              1: {'warp': row(1.0, 2.0, 0.15, 110.0), 'vse_warp': row(0.9, 2.2, 0.18, 70.0)},
              2: {'warp': row(1.0, 2.5, 0.17, 90.0), 'vse_warp': row(inf, inf, 0.14, 75.0)}}.items()}
  text = sampler_tables._over_seeds(runs, ('warp', 'vse_warp'))
  assert '| warp | 3 of 3 | 1.00× (1.00–1.00×) | 0.1600 (0.1500–0.1700) | 100 |' in text
  assert '| vse_warp | 2 of 3 | 1.35× (0.90–1.80×) | 0.1700 (0.1400–0.1800) | 75 |' in text

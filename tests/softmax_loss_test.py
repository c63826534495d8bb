"""The sampled-softmax loss over the K draws with the log-q correction
(loss.kind='softmax', wsabie/objective.py log_q_corrected): the step against
a dense reference, the correction's unbiasedness, padding."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.step_test import D, K, Y, d, _tiny_batch
from wsabie_jax.core import samplers
from wsabie_jax.wsabie import objective
from wsabie_jax.wsabie import step as step_lib


def _cfg(tables='rows', sampler='uniform', num_draws=K):
  return step_lib.StepConfig(
      num_labels=Y, model=step_lib.ModelConfig(dim=D, max_norm=float('inf'), tables=tables),
      loss=step_lib.LossConfig(kind='softmax', num_draws=num_draws, sampler=sampler),
      optim=step_lib.OptimConfig(kind='sgd', learning_rate=0.5))


@pytest.mark.parametrize('tables,num_draws', [('rows', K), ('whole', K), ('rows', 12)])
def test_the_step_is_sgd_on_the_sampled_softmax(tables, num_draws):
  """One step equals SGD on Σ_pairs −log(e^f_y / (e^f_y + (Y − |P|)/K · Σ_k e^f_k)),
  the same draws, differentiated densely (no row pieces, no tables)."""
  cfg = _cfg(tables, num_draws=num_draws)
  batch = _tiny_batch(seed=1)
  state = step_lib.init_state(jax.random.PRNGKey(4), d, cfg)
  key = jax.random.fold_in(state.key, state.step)
  neg_BxK = samplers.uniform_negatives(key, jnp.asarray(batch.pos_BxP),
                                       jnp.asarray(batch.num_pos_B), Y, num_draws)
  num_neg_B = Y - batch.num_pos_B

  def reference_loss(V, W):
    x_BxD = jnp.einsum('bf,bfd->bd', batch.feat_val_BxF, V[batch.feat_idx_BxF])
    f_BxY = x_BxD @ W.T
    pos_B = jnp.take_along_axis(f_BxY, batch.label_BxQ[:, 0][:, None], 1)[:, 0]
    negs_BxK = jnp.take_along_axis(f_BxY, jnp.asarray(neg_BxK), 1)
    partition_B = jnp.exp(pos_B) + num_neg_B / num_draws * jnp.sum(jnp.exp(negs_BxK), 1)
    return jnp.sum(jnp.log(partition_B) - pos_B)

  V, W = state.params
  # Both jitted: one compile each, where op by op they were some 300.
  loss, (gV, gW) = jax.jit(jax.value_and_grad(reference_loss, (0, 1)))(V, W)
  new, stats = jax.jit(step_lib.train_step, static_argnums=0)(cfg, state, batch)
  assert float(stats['loss']) == pytest.approx(float(loss), rel=1e-5)
  np.testing.assert_allclose(new.params.V_dxD, V - 0.5 * gV, atol=2e-6)
  np.testing.assert_allclose(new.params.W_YxD, W - 0.5 * gW, atol=2e-6)


@pytest.mark.parametrize('sampler', ['uniform', 'adaptive'])
def test_the_log_q_weights_estimate_the_negatives_partition_without_bias(sampler):
  """E[Σ_k w_k e^(f_k)] = Σ_{ȳ ∉ P} e^(f_ȳ) for draws from q, w = 1/(K·q): 40,000 draws of
  K = 4, within 1.5% (the estimate's standard error here is about 0.4%)."""
  rng = np.random.default_rng(0)
  Y_, K_, trials = 30, 4, 10_000
  scores = rng.normal(0, 1.5, Y_).astype(np.float32)
  positives = np.array([3, 7, 11])
  negatives = np.setdiff1d(np.arange(Y_), positives)
  q = (np.full(len(negatives), 1.0) if sampler == 'uniform'
       else np.exp(0.8 * scores[negatives]))  # a proposal that favours high scores
  q = q / q.sum()
  drawn = rng.choice(len(negatives), size=(trials, K_), p=q)
  cfg = dataclasses.replace(_cfg(sampler=sampler, num_draws=K_), num_labels=Y_)
  weigh = jax.vmap(lambda s, p: objective.log_q_corrected(
      cfg, jnp.float32(0), s, len(negatives), jnp.ones(K_, bool), p))
  _, w_TxK, _ = weigh(jnp.asarray(scores[negatives][drawn]), jnp.asarray(q[drawn], jnp.float32))
  estimate = np.mean(np.sum(np.asarray(w_TxK) * np.exp(scores[negatives][drawn]), 1))
  assert estimate == pytest.approx(np.exp(scores[negatives]).sum(), rel=0.015)


def test_a_pair_without_weight_costs_nothing_and_stays_finite():
  cfg = _cfg()
  loss = lambda pos, neg: objective.pairwise_loss(cfg, pos, neg, jnp.zeros(K))
  value, grads = jax.value_and_grad(loss, (0, 1))(jnp.float32(2.0), jnp.ones(K))
  assert float(value) == 0.0 and all(np.all(np.isfinite(g)) for g in grads)


def test_softmax_with_q_rows_and_padding_trains():
  """Q > 1 rows (padding pairs of weight 0) on a few hundred steps of the small
  synthetic set: the loss falls and stays finite."""
  from wsabie_jax.data import batching, synthetic
  ds = synthetic.generate(synthetic.SyntheticSpec(num_labels=40, num_features=200, nnz=10), 800)
  stream = batching.PairStream(ds, 32, 0, positives_per_row=3)
  cfg = step_lib.StepConfig(num_labels=40, model=step_lib.ModelConfig(dim=16),
                            loss=step_lib.LossConfig(kind='softmax', num_draws=10),
                            optim=step_lib.OptimConfig(learning_rate=0.1))
  state = step_lib.init_state(jax.random.PRNGKey(0), 200, cfg)
  step = jax.jit(lambda s, b: step_lib.train_step(cfg, s, b))
  losses = []
  for i in range(300):
    state, stats = step(state, stream.batch(i))
    losses.append(float(stats['loss']) / float(stats['pairs']))
  assert np.all(np.isfinite(losses))
  assert np.mean(losses[-50:]) < 0.8 * np.mean(losses[:20])

"""The objective of one positive pair, written per pair and vmapped by the
step: where its K negatives come from (uniform or VSE-ens draws), which of
them count and with what weight, and the loss of the weighted draws: WARP's
and AUC's hinge (paper 000 Alg. 1, eq. (9)), or the sampled softmax."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from wsabie_jax.core import samplers
from wsabie_jax.wsabie import adaptive_sampler, batch_draws, warp
from wsabie_jax.wsabie.settings import StepConfig


# ---- the sampler: its state, its draws' randomness and the probability q of
# each draw. A new sampler is its module, its name in settings.SAMPLERS, its
# branches here (these three, a negative source below, `choose_objective`)
# and a test (docs/DESIGN.md §4).

def initial_sampler(cfg: StepConfig, W_YxD: jax.Array):
  """The sampler's state at step 0 (TrainState.sampler): VSE-ens' per-factor
  label orders (Alg. 1 ll. 6–9); None for uniform draws, which keep none."""
  if cfg.loss.sampler == 'adaptive':
    return adaptive_sampler.refresh(W_YxD, 0)
  return None


def current_sampler(cfg: StepConfig, sampler, W_YxD: jax.Array, step: jax.Array,
                    global_batch_size: int):
  """The sampler's state for this step: VSE-ens' lists refreshed every
  |Y|·log|Y| pairs (Alg. 1 l. 4)."""
  if cfg.loss.sampler != 'adaptive':
    return None
  interval = adaptive_sampler.refresh_interval_steps(
      cfg.num_labels, global_batch_size, cfg.loss.refresh_every_pairs)
  return adaptive_sampler.maybe_refresh(sampler, W_YxD, step, interval)


def draw_uniforms(cfg: StepConfig, key: jax.Array, num_pos_B: jax.Array) -> jax.Array:
  """The randomness of the step's draws, B-leading (a data-parallel step slices
  it); with draws shared by the batch, their K label ids (every device's)."""
  if cfg.draws_shared:
    return batch_draws.draw(key, cfg.draws_per_pair, cfg.num_labels)
  if cfg.loss.sampler == 'adaptive':
    return adaptive_sampler.draw_uniforms(key, num_pos_B.shape[0], cfg.draws_per_pair)
  return samplers.uniform_draws(key, num_pos_B, cfg.num_labels, cfg.draws_per_pair)


def proposal(cfg: StepConfig, sampler, image_BxD: jax.Array, neg_BxK: jax.Array) -> jax.Array:
  """q of each draw, for the weighers that divide by it (importance weights,
  the sampled softmax): VSE-ens' proposal; zeros for uniform draws, whose
  q = 1 / (Y − |P|) the weighers know from num_negatives (and for AUC, which
  weighs no draw by q)."""
  if cfg.loss.sampler == 'adaptive' and cfg.loss.kind != 'auc':
    return adaptive_sampler.proposal_prob(sampler, image_BxD, neg_BxK, cfg.loss.rank_scale)
  return jnp.zeros(neg_BxK.shape)


# ---- drawing negatives: (ids_BxK, valid_BxK or None: every draw is a trial),
# chosen once by cfg.loss.sampler

def uniform_negatives(cfg, sampler, image_BxD, batch, u_BxK):
  """Alg. 1 l. 7: uniform over the labels that are not the image's positives
  (every draw a trial: valid None)."""
  return samplers.skip_positives(u_BxK, batch.pos_BxP, cfg.num_labels), None


def batch_negatives(cfg, sampler, image_BxD, batch, ids_K):
  """The batch's K shared draws (loss.draws='per_batch'), uniform over all Y;
  those on a row's positives are no trial for it (wsabie/batch_draws.py)."""
  return batch_draws.negatives(ids_K, batch.pos_BxP)


def adaptive_negatives(cfg, sampler, image_BxD, batch, u_BxK):
  """Paper 003 Alg. 1 ll. 12–18; draws that hit a positive are rejected (masked)."""
  neg_BxK = adaptive_sampler.draw(sampler, image_BxD, u_BxK, cfg.loss.rank_scale)
  return neg_BxK, ~samplers.is_positive(neg_BxK, batch.pos_BxP)


# ---- weighing the draws of one pair: (which draws J, their weights J, stats);
# min_negatives (static): the fewest negatives a pair of the batch has (warp.find_violator)

def _or_all(valid_K, neg_scores_K):
  """The draws' validity, every draw where the source gave None."""
  return jnp.ones(neg_scores_K.shape, bool) if valid_K is None else valid_K


def first_valid_draw(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K,
                     min_negatives=0):
  """AUC (paper 000 Table 5; paper 003 Alg. 1 l. 20): the plain hinge against
  the first draw that is not a positive, counted when it violates."""
  found, first = warp.first_true(_or_all(valid_K, neg_scores_K))
  if cfg.loss.pairwise == 'hinge':  # the logistic loss has no zero region: every draw counts
    found &= warp.violates(pos_score, neg_scores_K[first], cfg.loss.margin)
  return first[None], found.astype(jnp.float32)[None], (found, first + 1)


def _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K,
              min_negatives) -> warp.Violators:
  return warp.find_violator(pos_score, neg_scores_K, num_negatives, valid_K,
                            num_labels=cfg.num_labels, rank_weights=cfg.loss.rank_weights,
                            rank_estimate=cfg.loss.rank_estimate, margin=cfg.loss.margin,
                            min_negatives=min_negatives)


def first_violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K,
                   min_negatives=0):
  """Alg. 1: the first violator in draw order, weighted L(⌊(Y−1)/N⌋)."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, min_negatives)
  return pick.index_B[None], (pick.weight_B * pick.found_B)[None], (pick.found_B, pick.num_trials_B)


def every_violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K,
                   min_negatives=0):
  """Each of the v violators weighted L(rank)/v: the same expected loss as one
  uniformly chosen violator (eq. (6)), with less variance."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, min_negatives)
  weight_K = pick.violates_BxK * pick.weight_B / jnp.maximum(jnp.sum(pick.violates_BxK), 1)
  return jnp.arange(neg_scores_K.shape[0]), weight_K, (pick.found_B, pick.num_trials_B)


def importance_weighted(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K,
                        min_negatives=0):
  """VSE-ens + WARP: every violator, weighted by 1/q (warp.importance_weight)."""
  pick = _violator(cfg, pos_score, neg_scores_K, num_negatives, valid_K, min_negatives)
  _, weight_K = warp.importance_weight(pick.violates_BxK, proposal_K, num_negatives,
                                       num_labels=cfg.num_labels,
                                       rank_weights=cfg.loss.rank_weights)
  return jnp.arange(neg_scores_K.shape[0]), weight_K, (pick.found_B, pick.num_trials_B)


def log_q_corrected(cfg, pos_score, neg_scores_K, num_negatives, valid_K, proposal_K,
                    min_negatives=0):
  """Sampled softmax: every valid draw, weighted 1/(K·q) by the probability q
  it was drawn with (uniform: q = 1/(Y − |P|); VSE-ens: its proposal), so that
  Σ_k e^(f_k)/(K·q_k) estimates the negatives' Σ_ȳ e^(f_ȳ) without bias: the
  logits' log-q correction (Bengio & Senécal 2008; Jean et al. 2015)."""
  K = neg_scores_K.shape[0]
  valid_K = _or_all(valid_K, neg_scores_K)
  q_K = proposal_K if cfg.loss.sampler == 'adaptive' else jnp.full(K, 1.0) / num_negatives
  weight_K = jnp.where(valid_K, 1.0 / (K * jnp.maximum(q_K, 1e-30)), 0.0)
  return jnp.arange(K), weight_K, (jnp.any(valid_K), jnp.sum(valid_K))


def choose_objective(cfg: StepConfig):
  """(negative source, per-pair weigher) for the configured loss and sampler."""
  draw = (adaptive_negatives if cfg.loss.sampler == 'adaptive'
          else batch_negatives if cfg.draws_shared else uniform_negatives)
  if cfg.loss.kind == 'auc':
    return draw, first_valid_draw
  if cfg.loss.kind == 'softmax':
    return draw, log_q_corrected
  if cfg.loss.sampler == 'adaptive':
    return draw, importance_weighted
  return draw, every_violator if cfg.loss.violators == 'all' else first_violator


def pairwise_loss(cfg: StepConfig, pos, neg_J, weight_J) -> jax.Array:
  """Σ_j w_j·|margin − f_y(x) + f_ȳj(x)|₊ for one pair: eq. (9) with its weights;
  or Σ_j w_j·log(1 + e^(f_ȳj − f_y)) (`loss.pairwise='logistic'`, paper 003's Opt-AUC);
  or the sampled softmax's −log(e^(f_y) / (e^(f_y) + Σ_j w_j·e^(f_ȳj))), w_j = 1/(K·q_j)
  (`loss.kind='softmax'`: `log_q_corrected`; a pair with no weight costs 0)."""
  if cfg.loss.kind == 'softmax':
    others = jax.nn.logsumexp(jnp.where(weight_J > 0, neg_J, -jnp.inf), b=weight_J)
    return jnp.logaddexp(pos, others) - pos
  if cfg.loss.pairwise == 'logistic':
    return jnp.sum(weight_J * jax.nn.softplus(neg_J - pos))
  return jnp.sum(weight_J * warp.hinge(pos, neg_J, cfg.loss.margin))

"""WSABIE (paper 000) for the training loop: config → StepConfig, state, step, scorer.

Config sections model, loss and optim are wsabie/step.py's ModelConfig,
LossConfig and OptimConfig, field for field (`base_config` writes their
defaults); data, train and eval are the shared sections (data/settings.py,
training/settings.py).
"""
from __future__ import annotations

import logging
import time

import jax
import ml_collections

from wsabie_jax import data as data_lib
from wsabie_jax.baselines import ridge
from wsabie_jax.config.schema import ConfigError
from wsabie_jax.training import settings as run_config
from wsabie_jax.core import evaluation
from wsabie_jax.methods import common
from wsabie_jax.data import batching
from wsabie_jax.training import hosts, parallel
from wsabie_jax.training.method import NO_REFIT_WORK, Method, RefitWork
from wsabie_jax.wsabie import fitting, linear_member, neighbours, step as step_lib

log = logging.getLogger('wsabie_jax')

def base_config(data: ml_collections.ConfigDict | None = None, **sections) -> ml_collections.ConfigDict:
  """WSABIE's defaults on the given data (the synthetic default when None)."""
  return run_config.assemble('wsabie', step_lib.StepConfig.defaults(), data, **sections)


def step_config(config: ml_collections.ConfigDict, num_labels: int) -> step_lib.StepConfig:
  return step_lib.StepConfig.read(config, num_labels=num_labels)


def check_config(config: ml_collections.ConfigDict) -> dict:
  return step_config(config, num_labels=2).by_section()


def init_state(config, num_features: int, num_labels: int) -> step_lib.TrainState:
  return step_lib.init_state(jax.random.PRNGKey(config.seed), num_features,
                             step_config(config, num_labels))


def build(config: ml_collections.ConfigDict, mesh) -> Method:
  splits = common.load_splits(config)
  train = splits[0]
  config, values = fitting.resolve(config, train)  # the 'auto' fields
  if values:
    log.info('fitted to the data: %s', ', '.join(f'{k}={v}' for k, v in values.items()))
  cfg = step_config(config, train.num_labels)
  # (before the stream allocates a batch: rows ≥ images)
  parallel.check_batch(config.train.batch_size, train.num_images)
  stream = data_lib.pair_stream(train, config.train.batch_size, config.seed, mesh.devices.size,
                                config.train.positives_per_row)
  probe = None
  if config.train.probe_pairs:  # fixed training pairs, for paper 003 Fig. 1
    probe = data_lib.pair_stream(train, config.train.probe_pairs, config.seed + 1).batch(0)

  def on_validation(state) -> dict:
    if probe is None:
      return {}
    return {f'uniform_{k}': v for k, v in evaluation.uniform_draws_needed(
        state.params, probe, cfg.loss.margin, cfg.model.score).items()}

  seen = common.num_seen(train)
  prepare, tested, refit_work = (_with_member(config, cfg, splits, seen)
                                 if linear_member.members(cfg.model.ensemble) or cfg.model.neighbours
                                 or cfg.model.ensemble_pick
                                 else (None, None, NO_REFIT_WORK))
  return common.ranking_method(
      config, splits, lambda state: _scorer(state, seen), on_validation,
      lambda state, test, kw, workdir: {}, tested=tested, prepare=prepare, refit_work=refit_work,
      init_state=lambda: init_state(config, train.num_features, train.num_labels),
      stream=stream, mesh=mesh, vocabulary=common.vocabulary(train),
      pure_step=lambda state, batch: step_lib.train_step(cfg, state, batch),
      # Without a per-device step the step runs whole on every device (GSPMD).
      local_step=step_lib.local_train_step(cfg) if step_lib.has_local_step(cfg) else None)


def fit(config: ml_collections.ConfigDict) -> tuple[ml_collections.ConfigDict, dict]:
  """The config with its 'auto' fields fitted to the training data, and {field: value}."""
  return fitting.resolve(config, common.load_splits(config)[0])


def like_state(config: ml_collections.ConfigDict, vocab: dict) -> step_lib.TrainState:
  """A state shaped like a workdir's checkpoints (from its vocabulary.json), to restore into."""
  return init_state(config, vocab['num_features'], len(vocab['label_names']))


def _scorer(state, num_labels: int):
  V = state.params.V_dxD
  return (lambda i, v: evaluation.embed(V, i, v)), state.params.W_YxD[:num_labels]


def _picked(pick: str) -> tuple[str | None, float] | None:
  """model.ensemble_pick ('svm:4'; 'none:0' WSABIE alone) as (member, λ); None where unset."""
  if not pick:
    return None
  kind, _, weight = pick.partition(':')
  return (None, 0.0) if kind == 'none' or not float(weight) else (kind, float(weight))


def _with_member(config, cfg: step_lib.StepConfig, splits, seen: int):
  """(prepare, tested, refit_work) of the linear members beside WSABIE
  (model.ensemble, wsabie/linear_member.py): trained once on the training
  split before the steps (their seconds count in train.max_seconds); the
  member and its weight chosen with the best state on the validation split;
  where the run's model is the refit on the whole training file (train.refit),
  the chosen member trained again on that too, as the refit's own work (its
  seconds in the budget: Method.refit_work); saved in the workdir. WSABIE
  alone's test figures are kept as wsabie_*. With model.neighbours, the
  nearest training images' votes are weighed last on the same split
  (wsabie/neighbours.py), the tested state's own training images their
  neighbours (the whole file's after a refit)."""
  train, valid, test = splits
  trained, seconds, refit, chosen, whole, near_split = {}, [], {}, {}, [], {}
  k = cfg.model.neighbours
  if k and not isinstance(train, data_lib.SparseDataset):  # (said before any step is taken)
    raise ConfigError(f'model.neighbours={k} indexes the training images read whole; streamed '
                      "shards (data.kind='shards') take model.neighbours=0")
  picked = _picked(cfg.model.ensemble_pick)  # (member, λ) chosen on folds, or None
  kinds = (linear_member.members(cfg.model.ensemble) if picked is None  # (the members trained)
           else (picked[0],) if picked[0] else ())
  # (the whole file's size: a refit trains the member again on it)
  too_large = 'ridge' in kinds and ridge.too_large(train.num_images + valid.num_images,
                                                   train.num_features)
  if too_large:
    raise ConfigError(f'model.ensemble={cfg.model.ensemble!r} trains the ridge member: {too_large}')

  def member(kind, data, start=None):
    began = time.perf_counter()
    U = linear_member.train(kind, data, cfg.model, config.seed, start=start)
    seconds.append(time.perf_counter() - began)
    log.info('model.ensemble: %s trained on %d images in %.1f s', kind, data.num_images,
             seconds[-1])
    return U

  def prepare() -> float:
    if not trained:
      trained.update({kind: member(kind, train) for kind in kinds})
    return sum(seconds) + cfg.model.ensemble_choice_seconds

  def choice(best) -> tuple[str | None, float, float]:
    # Once a best state: the refit's decision makes it first (RefitWork.before,
    # its seconds spent before it), the test reads it. (member, λ, μ)
    step = int(best.step)
    if step not in chosen:
      prepare()
      padded_valid, eval_kw = batching.pad_images(valid), common.eval_kwargs(config, train)
      alone = _scorer(best, seen)
      kind, weight = picked or linear_member.choose(alone, trained, padded_valid,
                                                    config.train.select_metric, eval_kw)[:2]
      if k:  # (the best state's index of the split: the test reads it again where it is tested)
        near_split[step] = neighbours.index(best.params.V_dxD, train)
      mu = neighbours.choose(linear_member.combined(alone, trained.get(kind), weight), alone[0],
                             near_split[step], k, padded_valid,
                             config.train.select_metric, eval_kw)[0] if k else 0.0
      chosen[step] = kind, weight, mu
    return chosen[step]

  def whole_file():
    if not whole:
      config_whole = ml_collections.ConfigDict(config.to_dict())
      config_whole.data.validation_fraction = 0.0
      whole.append(common.load_splits(config_whole)[0])
    return whole[0]

  def on_whole_file(kind):
    return member(kind, whole_file(), start=trained.get(kind))

  def refit_seconds() -> float:
    # The costliest member's training on the split, in proportion to the whole
    # file's images (the one chosen is trained again after the refit's steps;
    # an L-BFGS member, started from the split's, takes less: a bound).
    return max(seconds[:len(trained)], default=0.0) / max(1 - config.data.validation_fraction,
                                                          1e-9)

  def choose_first(best) -> None:
    if valid.num_images:
      choice(best)

  def refit_run(best) -> None:
    if valid.num_images:
      kind, weight, mu = choice(best)
      refit.update(kind=kind, weight=weight, mu=mu,
                   member=on_whole_file(kind) if weight else None)

  def tested(state, best, workdir):
    alone = _scorer(state, seen)
    if valid.num_images == 0:
      log.info('model.ensemble: no validation split to weigh a member on; WSABIE alone is tested')
      return alone, {}
    if state is not best and refit:  # (the refit's work: chosen, trained on the whole file)
      kind, weight, mu, U = refit['kind'], refit['weight'], refit['mu'], refit['member']
    else:
      kind, weight, mu = choice(best)
      U = trained[kind] if kind else None  # (λ 0: WSABIE alone, no table kept)
      if weight and state is not best:  # (a refit made before a resume: trained again here)
        U = on_whole_file(kind)
    # The tested state's neighbours: the images it trained on.
    near = (None if not mu else near_split[int(best.step)] if state is best
            else neighbours.index(state.params.V_dxD, whole_file()))
    if hosts.is_writer():
      linear_member.save(workdir, U, weight, kind or 'none')
      if k:
        neighbours.save(workdir, near, mu, k)
    by_itself = common.evaluate_split(config, train, test, alone, baseline=False)
    return neighbours.combined(linear_member.combined(alone, U, weight), alone[0], near, k, mu), {
        'ensemble_member': kind or 'none', 'ensemble_weight': weight, 'neighbours_weight': mu,
        'ensemble_seconds': sum(seconds),
        **({'ensemble_pick': cfg.model.ensemble_pick,
            'ensemble_choice_seconds': cfg.model.ensemble_choice_seconds} if picked else {}),
        **{f'wsabie_{k}': by_itself[k] for k in ('p@1', 'p@5', 'map')}}

  choices = (1 + (len(linear_member.WEIGHTS) - 1) * len(kinds) if picked is None else 0) + (
      len(neighbours.WEIGHTS) if k else 0)
  return prepare, tested, RefitWork(refit_seconds, refit_run, choose_first,
                                    evaluations=choices if valid.num_images else 0)


def scorer(config: ml_collections.ConfigDict, vocab: dict, state, workdir=None):
  """(embed_fn(feat_idx_BxF, feat_val_BxF) -> images_BxD, labels_YxD) of a
  restored state, with the workdir's ensemble member and neighbours' votes
  where it has them."""
  own = _scorer(state, vocab.get('num_seen_labels') or len(vocab['label_names']))
  member = linear_member.load(workdir) if workdir is not None else None
  near = neighbours.load(workdir) if workdir is not None else None
  got = own if member is None else linear_member.combined(own, member['member'], member['weight'])
  return got if near is None else neighbours.combined(got, own[0], near['neighbours'], near['k'],
                                                      near['weight'])


def evaluate(config: ml_collections.ConfigDict, vocab: dict, state, split: str,
             baseline: bool, workdir=None) -> dict:
  """Ranking metrics of a restored state on a split of its data (launch/evaluate.py)."""
  train, valid, test = common.load_splits(config)
  return common.evaluate_split(config, train, test if split == 'test' else valid,
                               scorer(config, vocab, state, workdir), baseline)


# Paper 003 Tables 2 and 4: one negative sampler and loss per row.
SAMPLER_ROWS = ('warp', 'vse_hinge', 'vse_warp', 'auc')


def apply_sampler_row(c: ml_collections.ConfigDict, row: str, adaptive_draws: int,
                      rank_scale: float) -> ml_collections.ConfigDict:
  """warp: uniform fixed-budget WARP (K parallel draws, first violator);
  vse_hinge: adaptive draws (paper 003 Alg. 1), plain hinge against the first
  draw that is not a positive (the paper's VSE-ens); vse_warp: adaptive draws
  with WARP weighting by importance (warp.importance_weight); auc: one uniform
  negative, plain hinge (Opt-AUC / paper 000's AUC)."""
  if row not in SAMPLER_ROWS:
    raise ValueError(f'unknown row {row!r} (expected one of {SAMPLER_ROWS})')
  c.train.select_metric = 'p@5'
  if row == 'warp':
    c.train.probe_pairs = 1000  # paper 003 Fig. 1: draws uniform WARP needs per update
  elif row == 'auc':
    c.loss.kind = 'auc'
  else:
    c.loss.update(sampler='adaptive', num_draws=adaptive_draws, rank_scale=rank_scale)
    if row == 'vse_hinge':
      c.loss.kind = 'auc'
    else:
      c.loss.update(kind='warp', violators='all', rank_estimate='violator_count')
  return c

"""WSABIE settings fitted to the training set's sizes: the fields a config
writes as 'auto' (configs/wsabie_mulan.py), resolved when the method is built
(methods/wsabie.py) and written into the run's config.json.

  loss.num_draws      K = min(Y − 1, max_draws): every violator's rank counted
                      among K draws; a step's cost never grows with Y beyond it
                      (large_max_draws on a large set: 25 and 50 were no better)
  loss.kind           'exact' where K = Y − 1 would draw every negative (eq. (6)
                      with (7): every label scored, its violators counted; no
                      draws, the same B·Y·D cost), and where a row's many
                      positives (Q > first_violator_max_positives) share labels
                      read whole anyway; else 'warp'
  loss.draws          'per_batch' (the batch's rows share their K draws, scored by
                      one matmul: wsabie/batch_draws.py) where the labels are too
                      many to read whole (Y > 24·(K+Q): wsabie/table_reads.py), K
                      then batch_max_draws and B about rows / batch_steps_per_epoch
                      (a step pushes down only its K draws: more steps, more of
                      the labels); else 'per_row'
  loss.violators, loss.rank_estimate
                      Alg. 1's first violator (rank ⌊(Y − 1)/N⌋) where a row's own
                      draws serve few positives (Q ≤ first_violator_max_positives),
                      else every violator (rank from their count: each positive's
                      estimate from all K draws)
  optim.learning_rate exact_learning_rate for the exact rank where K covers every
                      negative, else learning_rate; on a set large enough that B
                      is at its ceiling (rows ≥ steps_per_epoch·max_batch)
                      large_exact_learning_rate and large_learning_rate
  train.positives_per_row
                      Q = ⌈mean positives⌉ + 1: an image is embedded and scored
                      once for up to Q of its positives, which share its K draws
  train.batch_size    B = the power of two nearest rows / steps_per_epoch, within
                      [min_batch, max_batch] (a step's fixed cost would dominate
                      smaller ones)
  model.ensemble      'one_vs_rest' where the member's d×Y table and its epochs
                      are small, with '+logistic', '+svm' and '+kernel' where
                      their L-BFGS passes are cheap too, each limit scaled down
                      in a budget under a minute (wsabie/linear_member.py
                      `auto`), else 'none'
  model.neighbours    k = 30 nearest training images' votes where the training
                      split holds 301-65,536 images (wsabie/neighbours.py `auto`), else 0
  data.standardize    'center' where the training file's features are dense
                      (resolved as the data is read: data/standardize.py), else 'none'

The rules' constants were chosen on validation splits of a panel of six real
data sets, then Delicious and the stand-ins: docs/TUNING.md has each one's
table and command (its candidates: benchmarks/search_rounds.py);
tests/fitting_test.py pins the rules on hand-worked data shapes.
"""
from __future__ import annotations

import dataclasses
import math

import ml_collections
import numpy as np

from wsabie_jax.config.schema import AUTO
from wsabie_jax.data import standardize
from wsabie_jax.wsabie import linear_member, neighbours, settings, table_reads

FIELDS = ('loss.num_draws', 'loss.kind', 'loss.draws', 'loss.violators', 'loss.rank_estimate',
          'optim.learning_rate', 'train.positives_per_row', 'train.batch_size', 'model.ensemble',
          'model.neighbours', 'data.standardize')


@dataclasses.dataclass(frozen=True)
class Rules:
  steps_per_epoch: int = 6      # B: about this many steps an epoch
  max_draws: int = 100          # K caps here
  min_batch: int = 128          # B's floor
  max_batch: int = 1024         # B's ceiling
  group_pairs: bool = True      # False: a pair a row (Q = 1)
  exact_ranks: bool = True      # the exact rank where K would cover every negative
  learning_rate: float = 0.01   # Adagrad's rate with draws
  large_learning_rate: float = 0.05  # … on a set of ≥ steps_per_epoch·max_batch rows
  large_max_draws: int = 100    # K on such a set (25 and 50 no better)
  exact_learning_rate: float = 0.005  # the exact rank's
  large_exact_learning_rate: float = 0.025  # … on a set of ≥ steps_per_epoch·max_batch rows
  batch_draws: bool = True      # draws shared by a batch's rows where the labels are gathered
  batch_max_draws: int = 300    # K of shared draws
  batch_steps_per_epoch: int = 24  # B with shared draws: more, smaller steps
  first_violator_max_positives: int = 8  # Q up to this: Alg. 1's first violator


def fitted(config: ml_collections.ConfigDict, train, rules: Rules = Rules()) -> dict:
  """{'section.field': value} for each field of FIELDS the config sets to 'auto',
  fitted to `train`, the training split (its validation split left out)."""
  if not any(_get(config, name) == AUTO for name in FIELDS):
    return {}
  Y = train.num_labels
  num_pos = np.diff(train.label_indptr)
  num_pos = num_pos[num_pos > 0]
  Q = int(math.ceil(num_pos.mean())) + 1 if num_pos.size and rules.group_pairs else 1
  if config.train.positives_per_row != AUTO:
    Q = config.train.positives_per_row
  rows = int(np.sum(-(-num_pos // Q)))  # (`train` is the split the run trains on)
  B = _batch_size(rows, rules.steps_per_epoch, rules)
  # A set large enough for B at its ceiling takes many steps an epoch: there a
  # higher rate reached a better validation p@1 in the same time; fewer draws
  # did not (docs/TUNING.md "The rate on larger sets", "The draws on larger sets").
  large = rows >= rules.steps_per_epoch * rules.max_batch
  K_drawn = max(1, min(Y - 1, rules.large_max_draws if large else rules.max_draws))
  K_row = K_drawn if config.loss.num_draws == AUTO else config.loss.num_draws
  # Each row's K draws would be gathered rows: too many labels to read whole.
  gathered = (Y > table_reads.LABELS_PER_GATHERED_ROW * (K_row + Q)
              and config.model.tables not in ('whole', 'labels'))
  covered = Y - 1 <= rules.max_draws  # K draws would cover every negative
  many = Q > rules.first_violator_max_positives
  uniform = config.loss.sampler == 'uniform'  # (the adaptive sampler needs draws)
  kind = config.loss.kind
  if kind == AUTO:
    # The exact rank where K would draw every negative, and where a row's many
    # positives share labels read whole anyway (every score is made: Delicious
    # +0.008 valid p@1 at 60 s, many_labels +0.002; docs/TUNING.md "The exact
    # rank where rows hold many positives").
    kind = ('exact' if rules.exact_ranks and uniform and (covered or (many and not gathered))
            else 'warp')
  K = K_drawn if kind == 'warp' else max(1, min(Y - 1, rules.max_draws))
  # Where each row's K draws would be gathered rows, the batch shares K draws
  # instead: a B×K matmul, not B·K gathers, and more draws for the same time
  # (docs/TUNING.md "Draws shared by a batch").
  draws = config.loss.draws
  if draws == AUTO:
    shared_ok = settings.draws_can_be_shared(kind, config.loss.sampler, config.model.score,
                                             config.optim.l2)
    draws = 'per_batch' if rules.batch_draws and kind == 'warp' and gathered and shared_ok \
        else 'per_row'
  if draws == 'per_batch' and kind == 'warp':
    K = max(1, min(Y - 1, rules.batch_max_draws))
    B = _batch_size(rows, rules.batch_steps_per_epoch, rules)
  # A row's own draws serving few positives: Alg. 1's first violator, the one
  # update a pair (text +0.014 / +0.020 valid p@1 at 20 / 60 s, Corel5k
  # +0.012); serving many (Delicious, many_labels: Q 21-22) or shared by the
  # batch (many_tags −0.014), every violator counted (docs/TUNING.md "The first
  # violator where rows hold few positives").
  first = kind == 'warp' and draws == 'per_row' and uniform and not many
  # The exact rank where K covers every negative at its own rate (docs/TUNING.md
  # "The search"); elsewhere at the draws' (Delicious 0.670 at 0.05, 0.662 at 0.005).
  # A large set at 5× either, as the draws' rate (tmc2007-500: the peers' p@1
  # on a fifth of its training file in 0.4-0.5 s of steps, not 1.7-2.1 s; 60 s
  # level: docs/TUNING.md "The exact rank's rate on a large set").
  rate = ((rules.large_exact_learning_rate if large else rules.exact_learning_rate)
          if kind == 'exact' and covered
          else rules.large_learning_rate if large else rules.learning_rate)
  values = {'loss.num_draws': K, 'loss.kind': kind, 'loss.draws': draws,
            'loss.violators': 'first' if first else 'all',
            'loss.rank_estimate': 'first_violator' if first else 'violator_count',
            'optim.learning_rate': rate, 'train.positives_per_row': Q, 'train.batch_size': B}
  if config.model.ensemble == AUTO:  # (not under a zero-shot hold-out: its labels rank by W alone)
    values['model.ensemble'] = (linear_member.auto(len(train.label_indptr) - 1, train.num_features, Y,
                                                   config.model.score,
                                                   config.model.ensemble_kernel_landmarks,
                                                   _num_values(train),
                                                   config.model.ensemble_epochs,
                                                   config.train.max_seconds)
                                if train.num_seen_labels is None else 'none')
  if config.model.get('neighbours') == AUTO:  # (the same: a zero-shot label has no neighbours' votes)
    values['model.neighbours'] = (neighbours.auto(len(train.label_indptr) - 1, config.model.score)
                                  if train.num_seen_labels is None else 0)
  # As the data layer resolved it reading the training file (a split read with
  # another data section, as the panel's, by the same density rule: the
  # normalisation leaves it, the bias feature moves it by under 1/d).
  shift = getattr(train, 'standardized', None)
  values['data.standardize'] = (shift.kind if shift is not None
                                else standardize.resolve(config.data.get('standardize', 'none'), train))
  return {name: value for name, value in values.items() if _get(config, name) == AUTO}


def _num_values(train) -> int | None:
  """The training split's stored feature values (None where it does not say:
  linear_member.auto bounds them by n·d)."""
  indptr = getattr(train, 'feat_indptr', None)
  return None if indptr is None else int(indptr[-1])


def resolve(config: ml_collections.ConfigDict, train,
            rules: Rules = Rules()) -> tuple[ml_collections.ConfigDict, dict]:
  """(a copy of the config with its 'auto' fields fitted, {field: value fitted})."""
  values = fitted(config, train, rules)
  if not values:
    return config, {}
  out = ml_collections.ConfigDict(config.to_dict())
  with out.ignore_type():  # ('auto' is a str)
    for name, value in values.items():
      section, field = name.split('.')
      out[section][field] = value
  return out, values


def _batch_size(rows: int, steps_per_epoch: int, rules: Rules) -> int:
  """The power of two nearest rows / steps_per_epoch, within [min_batch, max_batch]."""
  return int(np.clip(2 ** round(math.log2(max(rows / steps_per_epoch, 1))),
                     rules.min_batch, rules.max_batch))


def _get(config, name: str):
  section, field = name.split('.')
  return config[section].get(field)  # (a config written before a field had it)

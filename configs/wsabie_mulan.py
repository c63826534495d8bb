"""WSABIE + WARP with settings that follow the data: one config for any
multi-label data set in Mulan (ARFF + label XML) or libsvm format.

  python launch/train.py --config=configs/wsabie_mulan.py:DIR --workdir=RUN
  python launch/train.py --config=configs/wsabie_mulan.py:libsvm,DIR --workdir=RUN

DIR holds NAME-train.arff, NAME-test.arff and NAME.xml, as Mulan distributes
them (libsvm: train.txt, test.txt, optional labels.txt). Without DIR it runs
on the shipped Corel5k. The training file is read once here for its sizes
(labels Y, training pairs), and `fit` turns them into B and K (written into
config.json, so a run records what it used):

  K = min(Y − 1, MAX_DRAWS)    every violator's rank counted among K draws;
                               where K = Y − 1 would draw every negative, the
                               exact rank instead (loss.kind 'exact', eq. (6)
                               with (7): every label scored, its violators
                               counted; no draws, the same B·Y·D cost; Adagrad
                               rate EXACT_LEARNING_RATE)
  Q = ⌈mean positives⌉ + 1     pairs a row: an image is embedded and scored
                               once for up to Q of its positives, which share
                               its K draws (train.positives_per_row)
  B = the power of two nearest rows / STEPS_PER_EPOCH, within [128, 1024]
                               (a step's fixed cost would dominate smaller ones)

With a time budget (--config.train.max_seconds=60) it validates about 30
times over the budget whatever the data's speed (train.evals_per_budget), and
at least every 10 epochs (small sets run tens of epochs a second and overfit
between validations spread over a minute), patience 8 of them, and tests the
best checkpoint.

The constants and the rest (D, C, learning rate, bias feature) were chosen
on validation splits carved from the training files of a panel of six real
data sets (Corel5k and five Mulan sets), the test splits untouched; README
"Defaults across data" has the search and the panel's figures.
"""
import math
import os

import ml_collections
import numpy as np

from wsabie_jax.config import parse_arg, presets
from wsabie_jax.data import corel5k_paths, read_split
from wsabie_jax.methods import wsabie

STEPS_PER_EPOCH = 6    # B follows the data's size: about this many steps an epoch
MAX_DRAWS = 100        # K caps here: a step's cost never grows with Y beyond it
MIN_BATCH = 128        # B's floor: below it a step's fixed cost dominates (search round 5)
MAX_BATCH = 1024       # B's ceiling
EXACT_LEARNING_RATE = 0.005  # the exact rank's Adagrad rate (search round 6)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg, flags=('libsvm', 'small'), rest='data_dir', where='wsabie_mulan.py')
  c = wsabie.base_config(_data(a['data_dir'], a['libsvm']))
  c.model.update(dim=128, max_norm=3.0)
  c.loss.update(violators='all', rank_estimate='violator_count')
  c.optim.update(kind='adagrad', learning_rate=0.01)
  c.train.update(num_epochs=3 if a['small'] else 100, eval_every_steps=200, evals_per_budget=30,
                 max_epochs_between_evals=10.0,
                 checkpoint_every_steps=2000, patience=8, eval_subset=2000, select_metric='map')
  return fit(c, read_split(c.data, c.data.train_path))


def fit(c: ml_collections.ConfigDict, train, steps_per_epoch: int = STEPS_PER_EPOCH,
        max_draws: int = MAX_DRAWS, group_pairs: bool = True,
        min_batch: int = MIN_BATCH, exact_ranks: bool = True,
        exact_learning_rate: float = EXACT_LEARNING_RATE) -> ml_collections.ConfigDict:
  """B, Q and K from the training set's sizes (the module docstring's rules);
  `group_pairs=False`: a pair a row (Q = 1); `exact_ranks`: the exact rank,
  at `exact_learning_rate`, where K would cover every negative."""
  num_pos = np.diff(train.label_indptr)
  num_pos = num_pos[num_pos > 0]
  Q = int(math.ceil(num_pos.mean())) + 1 if num_pos.size and group_pairs else 1
  c.train.positives_per_row = Q
  rows = int(np.sum(-(-num_pos // Q)) * (1 - c.data.validation_fraction))
  c.train.batch_size = int(np.clip(2 ** round(math.log2(max(rows / steps_per_epoch, 1))),
                                   min_batch, MAX_BATCH))
  c.loss.num_draws = max(1, min(train.num_labels - 1, max_draws))
  if exact_ranks and train.num_labels - 1 <= max_draws:
    c.loss.kind = 'exact'
    c.optim.learning_rate = exact_learning_rate
  return c


def _data(folder: str, libsvm: bool) -> ml_collections.ConfigDict:
  if not folder:
    return presets.file_data('mulan', *corel5k_paths(), bias_feature=1.0)
  if libsvm:
    labels = os.path.join(folder, 'labels.txt')
    return presets.file_data('libsvm', os.path.join(folder, 'train.txt'),
                             os.path.join(folder, 'test.txt'),
                             labels if os.path.exists(labels) else '', bias_feature=1.0)
  return presets.mulan_folder(folder, bias_feature=1.0)

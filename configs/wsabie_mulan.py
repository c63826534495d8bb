"""WSABIE + WARP with settings that follow the data: one config for any
multi-label data set in Mulan (ARFF + label XML) or libsvm format.

  python launch/train.py --config=configs/wsabie_mulan.py:DIR --workdir=RUN
  python launch/train.py --config=configs/wsabie_mulan.py:libsvm,DIR --workdir=RUN

DIR holds NAME-train.arff, NAME-test.arff and NAME.xml, as Mulan distributes
them (libsvm: train.txt, test.txt, optional labels.txt). Without DIR it runs
on the shipped Corel5k. The batch size B, pairs a row Q, draws K, the loss
(the exact rank where K would cover every negative or a row's many
positives share labels read whole; else the draws, with the first violator
or every one) and its learning rate are 'auto': the run fits them to the
training set's sizes when it starts (wsabie/fitting.py has the rules) and
writes the values into its config.json; `launch/train.py --config=…
--print_config` shows them without training.

It trains 100 epochs; with a time budget (--config.train.max_seconds=60)
as many as the budget holds while validation improves (train.num_epochs
'auto': no epoch cap), validating about 30 times over the budget whatever
the data's speed (train.evals_per_budget; fewer where one validation
costs more than a quarter of the steps between two) and at least every 10 epochs
(small sets run tens of epochs a second and overfit between validations
spread over a minute). After 8 validations without a better one it goes back
to its best state at a quarter of the learning rate, up to three times
(train.plateau_drops), while the budget would still hold the refit after
the drop (train.refit_reserved), then stops. Where that leaves time in the
budget, a new model is trained on the whole training file, the validation
split included, along the best state's path, and is the one tested
(train.refit: docs/TUNING.md "Refit on the whole training file"); else the
best checkpoint is.

Beside WSABIE it trains full-rank members (model.ensemble 'auto': paper
000's One-vs-Rest where its features × labels table is small, One-vs-Rest
logistic regression and the L2-loss linear SVM where their passes over the
data are cheap too, and the SVM with the Gaussian kernel on training splits
of a few thousand images; seconds, counted in the budget: under a minute's
budget each cost limit shrinks in proportion, so a 1-s run on Corel5k trains
none) and tests the sum
of WSABIE's and one member's standardised scores, the member and its weight
chosen on the validation split, WSABIE alone included (Table 7's ensemble;
wsabie/linear_member.py); on a training file of at most 2,048 images with a
budget of 30 s or more, chosen on five folds of it instead, by runs of the
config on four fifths each in a sixth of the budget each (model.ensemble_choice
'auto': api/fold_choice.py). The ridge member (regularised least squares
in closed form, its λ by exact leave-one-out: baselines/ridge.py) is not
among 'auto''s members (docs/RESULTS.md "The ridge member"); a run names it,
e.g. --config.model.ensemble=one_vs_rest+ridge. To that sum it adds the
votes of each image's 30 nearest training images in WSABIE's embedding
space (model.neighbours
'auto': training splits of 301-65,536 images), at the weight the validation
split picks, 0 included (wsabie/neighbours.py).

The constants and the rest (D, C, learning rate, bias feature, the
features' damping, dense features centred) were chosen
on validation splits carved from the training files of a panel of six real
data sets (Corel5k and five Mulan sets), Delicious and synthetic stand-ins,
the test splits untouched; docs/RESULTS.md "One config for any multi-label
set" has the search and the panel's figures.
"""
import os

import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.config.schema import auto
from wsabie_jax.data import settings as data_config
from wsabie_jax.data import corel5k_paths
from wsabie_jax.methods import wsabie


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg, flags=('libsvm', 'small'), rest='data_dir', where='wsabie_mulan.py')
  c = wsabie.base_config(_data(a['data_dir'], a['libsvm']))
  c.model.update(dim=128, max_norm=100.0)  # a loose bound: docs/TUNING.md "The max-norm bound C"
  # Paper 000 Table 7's ensemble with linear members where they are cheap,
  # weighed on the validation split (docs/RESULTS.md "The One-vs-Rest member").
  c.model.ensemble = 'auto'
  # The logistic member's C: 10 against scikit-learn's 1 pooled over 5 folds of
  # each small training file, scene +0.015 p@1, enron +0.007, Corel5k −0.007
  # (docs/RESULTS.md "The logistic member").
  c.model.ensemble_logistic_C = 10.0
  # The member and λ chosen on five folds of a small training file, not its
  # tenth alone (api/fold_choice.py; docs/RESULTS.md "The choice on
  # folds").
  c.model.ensemble_choice = 'auto'
  # The votes of each image's 30 nearest training images in WSABIE's space,
  # weighed last on the validation split (wsabie/neighbours.py; docs/RESULTS.md
  # "The neighbours term").
  c.model = auto(c.model, 'neighbours')
  # Fitted to the training set when the run starts (wsabie/fitting.py):
  c.loss = auto(c.loss, 'kind', 'num_draws', 'draws', 'violators', 'rank_estimate')
  c.optim = auto(c.optim, 'learning_rate', kind='adagrad')
  c.train = auto(c.train, 'batch_size', 'positives_per_row', 'num_epochs')
  if a['small']:  # (a quick pass: the kernel member over 256 landmarks, not 2,048)
    c.train.num_epochs = 3
    c.model.ensemble_kernel_landmarks = 256
  c.train.update(eval_every_steps=200, evals_per_budget=30,
                 max_epochs_between_evals=10.0,
                 checkpoint_every_steps=2000, patience=8, plateau_drops=3, eval_subset=2000,
                 select_metric='map', refit=True)
  return c


# Counts damped before the unit norm (debtags +0.0075 valid p@1, the others
# level; binary features are unchanged by it: docs/RESULTS.md, `--panel_round=23`). Dense features
# centred on the training file's mean first (scene +0.017 p@1 over five folds,
# yeast +0.003; sparse sets untouched: docs/RESULTS.md "Centred dense features").
FEATURES = dict(bias_feature=1.0, normalize='log_l2', standardize='auto')


def _data(folder: str, libsvm: bool) -> ml_collections.ConfigDict:
  if not folder:
    return data_config.file_data('mulan', *corel5k_paths(), **FEATURES)
  if libsvm:
    labels = os.path.join(folder, 'labels.txt')
    return data_config.file_data('libsvm', os.path.join(folder, 'train.txt'),
                             os.path.join(folder, 'test.txt'),
                             labels if os.path.exists(labels) else '', **FEATURES)
  return data_config.mulan_folder(folder, **FEATURES)

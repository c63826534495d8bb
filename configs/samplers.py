"""Paper 003 Tables 2/4, one row a run: the negative sampler and the loss.

  python launch/compare_samplers.py --data=synthetic --workdir=runs/samplers_synthetic
  python launch/train.py --config=configs/samplers.py:vse_warp,synthetic --workdir=W

The argument is "ROW,DATA[,paper][,small]". `paper`: paper 003's protocol —
leave-one-out (one tag of each image held out, half for validation, half for
test, ranked without the image's training tags), one embedding per image ID,
D = k = 100, N(0, 0.01²) init, no max-norm, plain SGD η = 0.01 with L2 0.01,
Opt-AUC with the logistic loss, and the whole time budget for every row.
ROW (methods/wsabie.py apply_sampler_row):
warp (uniform fixed-budget WARP), vse_hinge (VSE-ens as the paper), vse_warp
(adaptive draws, WARP weighting), auc. Every row gets the same optimiser,
data, budget and validation schedule, so the time to reach 95% of the best
validation p@5 compares the samplers. DATA:

  synthetic  the default job at Y = 10,000 (adaptive K = 10, λ = 0.01, 150 s a row).
  corel5k    configs/wsabie_corel5k.py (adaptive K = 20, λ = 0.02, 120 s a row).

Each row's test p@5 / MAP and time to 95% of validation p@5, with the command
that printed them: docs/SAMPLERS.md.
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg
from wsabie_jax.methods import wsabie

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str = 'warp,synthetic') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'row': wsabie.SAMPLER_ROWS, 'data': ('synthetic', 'corel5k')},
                defaults={'data': 'synthetic'}, flags=('paper', 'small'), where='samplers.py')
  size = ':small' if a['small'] else ''
  c = config_lib.load(os.path.join(_HERE, f'wsabie_{a["data"]}.py') + size)
  if a['data'] == 'synthetic':
    if not a['small']:
      c.data.synthetic.num_labels = 10_000
    c.train.update(num_epochs=200, max_seconds=3.0 if a['small'] else 150.0,
                   eval_every_steps=75 if a['small'] else 150,
                   patience=6)
    c = wsabie.apply_sampler_row(c, a['row'], adaptive_draws=10, rank_scale=0.01)
  else:
    c.train.update(num_epochs=300, max_seconds=3.0 if a['small'] else 120.0, eval_every_steps=100)
    c = wsabie.apply_sampler_row(c, a['row'], adaptive_draws=20, rank_scale=0.02)
  if a['paper']:
    paper_protocol(c, a['row'])
  return c


def paper_protocol(c: ml_collections.ConfigDict, row: str) -> None:
  """Paper 003 §"Experimental Setup" (see the module docstring)."""
  c.data.update(protocol='leave_one_out', features='image_id', bias_feature=0.0)
  c.model.update(dim=100, init_std=0.01, max_norm=float('inf'))
  c.optim.update(kind='sgd', learning_rate=0.01, l2=0.01)
  # Plain SGD at η = 0.01 learns slowly (AUC above all, with no rank weight):
  # patience would stop a row before it starts; each row takes the whole budget.
  c.train.patience = 10**6
  if row == 'auc':
    c.loss.pairwise = 'logistic'

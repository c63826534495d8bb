"""Paper 003 Tables 2/4, one row a run: the negative sampler and the loss.

  python launch/compare_samplers.py --data=synthetic --workdir=workdirs/samplers_synthetic
  python launch/train.py --config=configs/samplers.py:vse_warp,synthetic --workdir=W

The argument is "ROW,DATA[,small]". ROW (methods/wsabie.py apply_sampler_row):
warp (uniform fixed-budget WARP), vse_hinge (VSE-ens as the paper), vse_warp
(adaptive draws, WARP weighting), auc. Every row gets the same optimiser,
data, budget and validation schedule, so the time to reach 95% of the best
validation p@5 compares the samplers. DATA:

  synthetic  the default job at Y = 10,000 (adaptive K = 10, λ = 0.01, 150 s a row).
             Measured on a 2-core CPU (test p@5 / MAP; s to 95% of validation p@5):
             warp 0.162 / 0.452, 3.8 s; vse_hinge 0.179 / 0.502, 9.2 s; vse_warp
             0.171 / 0.486, 2.6 s (1.49×); auc 0.161 / 0.426, 6.4 s.
  corel5k    configs/wsabie_corel5k.py (adaptive K = 20, λ = 0.02, 120 s a row):
             warp 0.259 / 0.344, 8.7 s; vse_hinge 0.246 / 0.321, 3.0 s; vse_warp
             0.261 / 0.346, 4.7 s (1.82×); auc 0.178 / 0.212.
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg
from wsabie_jax.methods import wsabie

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str = 'warp,synthetic') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'row': wsabie.SAMPLER_ROWS, 'data': ('synthetic', 'corel5k')},
                defaults={'data': 'synthetic'}, flags=('small',), where='samplers.py')
  size = ':small' if a['small'] else ''
  c = config_lib.load(os.path.join(_HERE, f'wsabie_{a["data"]}.py') + size)
  if a['data'] == 'synthetic':
    if not a['small']:
      c.data.synthetic.num_labels = 10_000
    c.train.update(num_epochs=200, max_seconds=150.0, eval_every_steps=150, patience=6)
    return wsabie.apply_sampler_row(c, a['row'], adaptive_draws=10, rank_scale=0.01)
  c.train.update(num_epochs=300, max_seconds=120.0, eval_every_steps=100)
  return wsabie.apply_sampler_row(c, a['row'], adaptive_draws=20, rank_scale=0.02)

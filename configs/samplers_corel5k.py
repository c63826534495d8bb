"""Paper 003 Tables 2/4 rows on Corel5k (374 labels).

  python launch/compare_samplers.py --data=corel5k --workdir=workdirs/samplers_corel5k

The argument picks the row (configs/samplers.py): warp, vse_hinge, vse_warp, auc;
append ",small" for a 3-epoch run. The warp row is configs/wsabie_corel5k.py.
Measured on a 2-core CPU (test p@5 / MAP; seconds in steps to 95% of validation
p@5): warp 0.259 / 0.344, 8.7 s; vse_hinge 0.246 / 0.321, 3.0 s; vse_warp
0.261 / 0.346, 4.7 s (1.82×); auc 0.178 / 0.212.
"""
import ml_collections

from configs import samplers, wsabie_corel5k


def get_config(arg: str = 'warp') -> ml_collections.ConfigDict:
  row, _, size = arg.partition(',')
  c = wsabie_corel5k.get_config(size or None)
  c.train.num_epochs = 300
  c.train.max_seconds = 120.0
  c.train.eval_every_steps = 100
  return samplers.apply_row(c, row, adaptive_draws=20, rank_scale=0.02)

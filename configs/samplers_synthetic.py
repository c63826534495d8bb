"""Paper 003 Tables 2/4 rows on the synthetic default at Y = 10,000 labels.

  python launch/compare_samplers.py --data=synthetic --workdir=workdirs/samplers_synthetic
  python launch/train.py --config=configs/samplers_synthetic.py:vse_warp --workdir=W

The argument picks the row (configs/samplers.py): warp, vse_hinge, vse_warp, auc;
append ",small" for the test-sized data. Measured on a 2-core CPU (test p@5 /
MAP; seconds in steps to 95% of validation p@5): warp 0.162 / 0.452, 3.8 s;
vse_hinge 0.179 / 0.502, 9.2 s; vse_warp 0.171 / 0.486, 2.6 s (1.49×); auc
0.161 / 0.426, 6.4 s.
"""
import ml_collections

from configs import samplers, wsabie_synthetic


def get_config(arg: str = 'warp') -> ml_collections.ConfigDict:
  row, _, size = arg.partition(',')
  c = wsabie_synthetic.get_config(size or None)
  if not size:
    c.data.synthetic.num_labels = 10_000
  c.train.num_epochs = 200
  c.train.max_seconds = 150.0   # the same wall-clock budget for every row
  c.train.eval_every_steps = 150
  c.train.patience = 6
  return samplers.apply_row(c, row, adaptive_draws=10, rank_scale=0.01)

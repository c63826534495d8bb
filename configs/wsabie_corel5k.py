"""WSABIE + WARP on Corel5k (Mulan format: 4,500 train / 500 test, 374 labels).

  python launch/train.py --config=configs/wsabie_corel5k.py --workdir=/tmp/wsabie_corel5k

The paths default to ../shared/data/corel5k/ beside the clone when it exists;
point `--config.data.train_path`, `test_path` and `labels_path` at any other
Mulan data set (ARFF + label XML, sparse or dense). The model and its epoch are
chosen on a validation split carved from train (10%); the test split is only
scored at the end. Result on a 2-core CPU: see the README table.
"""
import os

import ml_collections

from configs import wsabie_synthetic

_HERE = os.path.dirname(os.path.abspath(globals().get('__file__', 'configs/x.py')))
_COREL = os.path.normpath(os.path.join(_HERE, '..', '..', 'shared', 'data', 'corel5k'))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = wsabie_synthetic.get_config()
  del c.data.synthetic, c.data.num_train, c.data.num_test
  c.data.kind = 'mulan'
  c.data.train_path = os.path.join(_COREL, 'Corel5k-train-sparse.arff')
  c.data.test_path = os.path.join(_COREL, 'Corel5k-test-sparse.arff')
  c.data.labels_path = os.path.join(_COREL, 'Corel5k.xml')
  c.data.normalize = 'l2'
  c.model.dim = 64
  c.loss.num_draws = 100
  c.optim.learning_rate = 0.05
  c.train.batch_size = 32
  c.train.num_epochs = 100
  c.train.eval_every_steps = 200
  c.train.checkpoint_every_steps = 2000
  c.train.patience = 8
  c.train.eval_subset = 450
  if arg == 'small':
    c.train.num_epochs = 3
  elif arg:
    raise ValueError(f'unknown config argument {arg!r} (expected "small")')
  return c

"""WSABIE + WARP on a folder of tagged images featurised by launch/featurize.py.

  python launch/featurize.py --images=DIR --tags=FILE --out=DATA_DIR
  python launch/train.py --config=configs/wsabie_folder.py:DATA_DIR --workdir=RUN
  python launch/annotate.py --workdir=RUN --images=photo.png

DATA_DIR holds train.txt / test.txt (libsvm: tag ids, visual term:count) and
labels.txt. The settings are Corel5k's (configs/wsabie_corel5k.py: a data set
of the same kind and size), with K = Y − 1 read from labels.txt; the epoch
is chosen on a 10% validation split of train.
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg, presets

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  data_dir = parse_arg(arg, rest='data_dir', where='wsabie_folder.py')['data_dir']
  if not data_dir:
    raise ValueError('give the featurised folder: --config=configs/wsabie_folder.py:DATA_DIR')
  c = config_lib.load(os.path.join(_HERE, 'wsabie_corel5k.py'))
  c.data = presets.file_data('libsvm', os.path.join(data_dir, 'train.txt'),
                             os.path.join(data_dir, 'test.txt'),
                             os.path.join(data_dir, 'labels.txt'), bias_feature=1.0,
                             featurized_dir=data_dir)  # annotate.py --images uses its codebook
  if os.path.exists(c.data.labels_path):
    with open(c.data.labels_path, encoding='utf-8') as f:
      c.loss.num_draws = max(1, sum(1 for _ in f) - 1)  # K = Y − 1: Alg. 1's full budget
  return c

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

from configs import wsabie_corel5k


def get_config(data_dir: str | None = None) -> ml_collections.ConfigDict:
  if not data_dir:
    raise ValueError('give the featurised folder: --config=configs/wsabie_folder.py:DATA_DIR')
  c = wsabie_corel5k.get_config()
  c.data.kind = 'libsvm'
  c.data.train_path = os.path.join(data_dir, 'train.txt')
  c.data.test_path = os.path.join(data_dir, 'test.txt')
  c.data.labels_path = os.path.join(data_dir, 'labels.txt')
  if os.path.exists(c.data.labels_path):
    with open(c.data.labels_path, encoding='utf-8') as f:
      c.loss.num_draws = max(1, sum(1 for _ in f) - 1)  # K = Y − 1: Alg. 1's full budget
  c.data.featurized_dir = data_dir  # launch/annotate.py --images featurises with its codebook
  return c

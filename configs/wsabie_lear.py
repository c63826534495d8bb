"""WSABIE + WARP on LEAR's iccv09 features (Corel5k, ESP-game, IAPR-TC12), through tfds.

  python launch/train.py --config=configs/wsabie_lear.py:corel5k --workdir=W \
      --config.data.manual_dir=/path/to/iccv09_files

The argument names the data set (corel5k, espgame, iaprtc12), optionally with
the folder of its files: `espgame,/path/to/iccv09_files`. The first run
prepares the tfds data set (wsabie_jax/data/tfds_builders.py, ArrayRecord)
under data.data_dir from the files in data.manual_dir — nothing is
downloaded; later runs read the prepared copy. Features: the eight V3H1 /
Gist bags concatenated (data/lear.py), l2-normalised; model and training as
configs/wsabie_corel5k.py. Not measured here (the files are not available
offline).
"""
import os

import ml_collections

from configs import wsabie_corel5k


def get_config(arg: str = 'corel5k') -> ml_collections.ConfigDict:
  arg, _, manual_dir = arg.partition(',')
  if arg not in ('corel5k', 'espgame', 'iaprtc12'):
    raise ValueError(f'unknown data set {arg!r} (expected corel5k, espgame or iaprtc12)')
  c = wsabie_corel5k.get_config()
  for key in ('train_path', 'test_path', 'labels_path'):
    del c.data[key]
  c.data.kind = 'tfds'
  c.data.tfds_name = f'lear_iccv09/{arg}'
  c.data.data_dir = os.path.expanduser('~/tensorflow_datasets')
  c.data.manual_dir = manual_dir
  c.data.bias_feature = 1.0
  return c

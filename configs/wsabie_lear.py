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

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str = 'corel5k') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'data': ('corel5k', 'espgame', 'iaprtc12')}, rest='manual_dir',
                where='wsabie_lear.py')
  c = config_lib.load(os.path.join(_HERE, 'wsabie_corel5k.py'))
  c.data = data_config.tfds_data(f'lear_iccv09/{a["data"]}', os.path.expanduser('~/tensorflow_datasets'),
                             a['manual_dir'])
  c.data.bias_feature = 1.0
  return c

"""WSABIE + WARP on a folder of tagged images featurised by launch/featurize.py.

  python launch/featurize.py --images=DIR --tags=FILE --out=DATA_DIR
  python launch/train.py --config=configs/wsabie_folder.py:DATA_DIR --workdir=RUN
  python launch/annotate.py --workdir=RUN --images=photo.png

DATA_DIR holds train.txt / test.txt (libsvm: tag ids, visual term:count) and
labels.txt. The settings are the data-agnostic ones of configs/wsabie_mulan.py
(B and K from the data's sizes, K capped so a step's cost does not grow with
the number of tags); the epoch is chosen on a 10% validation split of train.
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  data_dir = parse_arg(arg, rest='data_dir', where='wsabie_folder.py')['data_dir']
  if not data_dir:
    raise ValueError('give the featurised folder: --config=configs/wsabie_folder.py:DATA_DIR')
  c = config_lib.load(f'{os.path.join(_HERE, "wsabie_mulan.py")}:libsvm,{data_dir}')
  c.data.featurized_dir = data_dir  # annotate.py --images uses its codebook
  return c

"""Trains a model, evaluates the best checkpoint on the test split, writes metrics.json.

  python launch/train.py --config=configs/wsabie_synthetic.py --workdir=/tmp/run \
      [--config.train.num_epochs=5 ...]

Run again with the same --workdir to resume from the latest checkpoint.
"""
import json
import logging as py_logging
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging
from ml_collections import config_flags

from wsabie_jax import train

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file.',
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Checkpoints, summaries and metrics.json go here.')
flags.mark_flags_as_required(['config', 'workdir'])


def main(argv):
  del argv
  # Our progress at INFO; the libraries' (Orbax is chatty) at WARNING.
  logging.set_verbosity(logging.WARNING)
  py_logging.getLogger('wsabie_jax').setLevel(py_logging.INFO)
  metrics = train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  print(json.dumps(metrics, indent=2, sort_keys=True))


if __name__ == '__main__':
  app.run(main)

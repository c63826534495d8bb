"""WSABIE + WARP on Corel5k (Mulan format: 4,500 train / 500 test, 374 labels).

  python launch/train.py --config=configs/wsabie_corel5k.py --workdir=runs/corel5k

The data ships with the package (wsabie_jax/data/files/corel5k, 412 KB). Point
`--config.data.train_path`, `test_path` and `labels_path` at any other Mulan
data set (ARFF + label XML, sparse or dense). The model and its epoch are
chosen on a validation split carved from train (10%); the test split is only
scored at the end. Its test metrics (p@1 0.412, p@5 0.259, MAP 0.348 for
seed 0, the same on any CPU) are in docs/RESULTS.md with the command.
`:small` trains 3 epochs (tests).
"""
import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config
from wsabie_jax.data import corel5k_paths
from wsabie_jax.methods import wsabie


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg, flags=('small',), where='wsabie_corel5k.py')
  c = wsabie.base_config(data_config.file_data('mulan', *corel5k_paths(), bias_feature=1.0))
  # Chosen on the validation split (MAP, mean of seeds 0 and 1) from sweeps over
  # learning rate {0.005 … 0.1}, D {64, 128, 256}, C {1 … 10}, K {100, 373},
  # feature normalisation, bias feature, batch size {8, 32}, score, rank
  # estimate and first-vs-all violators; the test split was not used to choose.
  c.model.update(dim=128, max_norm=3.0)
  c.loss.update(num_draws=373,                 # K = Y − 1: Alg. 1's full budget
                violators='all',               # every violator among the K draws, each L(rank)/v
                rank_estimate='violator_count')
  c.optim.update(kind='adagrad', learning_rate=0.01)
  c.train.update(batch_size=32, num_epochs=3 if a['small'] else 100, eval_every_steps=200,
                 checkpoint_every_steps=2000, patience=8,
                 eval_subset=450,              # the whole validation split
                 select_metric='map')
  return c

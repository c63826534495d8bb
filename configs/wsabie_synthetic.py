"""WSABIE + WARP on the embedded synthetic data (the default job).

  python launch/train.py --config=configs/wsabie_synthetic.py --workdir=runs/synthetic

50,000 train (10% held out for validation) / 5,000 test planted images,
Y = 2,000 labels in sibling groups of 8, d = 10,000 visual words, ~40 word
draws per image (35% from the image's labels); D = 64, K = 100 draws, row-wise
Adagrad, 15 epochs: every setting is wsabie/step.py's default. Test p@1
0.656, p@10 0.133, psib@10 0.570, MAP 0.599 (the frequency baseline: p@1
0.176, p@10 0.052, psib@10 0.054); the figures and their command are in
docs/RESULTS.md.

`:small` (200 labels, 4,000 images, ~3 s of training) is for tests and quick checks.
"""
import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config
from wsabie_jax.methods import wsabie


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg, flags=('small',), where='wsabie_synthetic.py')
  c = wsabie.base_config(data_config.synthetic_data(small=a['small']))
  if a['small']:
    c.train.update(num_epochs=5, eval_every_steps=50, checkpoint_every_steps=100)
  return c

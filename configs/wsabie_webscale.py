"""WSABIE + WARP at paper 000's web scale, streamed from disk (Table 1 / Table 6).

  python launch/make_shards.py --config=configs/wsabie_webscale.py
  python launch/train.py --config=configs/wsabie_webscale.py --workdir=runs/webscale

10,000,000 synthetic train images × Y = 100,000 labels, d = 10,000 visual
words, ~245 distinct visual words per image (as paper 000 §6.2), in shards of 250,000
images; D = 100, K = 100; one epoch. The model is (Y + d)·D floats = 44 MB.
`:small` is the same pipeline at 20,000 images (tests).
"""
import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config
from wsabie_jax.methods import wsabie


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  small = parse_arg(arg, flags=('small',), where='wsabie_webscale.py')['small']
  data = data_config.shards_data(
      '/tmp/wsabie_webscale_small' if small else '/tmp/wsabie_webscale_shards',
      num_train=20_000 if small else 10_000_000, num_valid=500 if small else 10_000,
      num_test=500 if small else 10_000, shard_size=3000 if small else 250_000)
  data.synthetic.update(num_labels=1000 if small else 100_000, num_features=10_000,
                        nnz=40 if small else 480,  # draws; ~245 distinct non-zeros
                        signal=0.35)
  c = wsabie.base_config(data)
  c.model.dim = 100
  c.loss.num_draws = 100
  c.train.update(batch_size=256 if small else 512, num_epochs=1,
                 eval_every_steps=40 if small else 5000, checkpoint_every_steps=5000,
                 patience=10**6)
  return c

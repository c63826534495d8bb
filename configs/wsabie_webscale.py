"""WSABIE + WARP at paper 000's web scale, streamed from disk (Table 1 / Table 6).

  python launch/make_shards.py --config=configs/wsabie_webscale.py
  python launch/train.py --config=configs/wsabie_webscale.py --workdir=workdirs/webscale

10,000,000 synthetic train images × Y = 100,000 labels, d = 10,000 visual
words, ~245 distinct visual words per image (as paper 000 §6.2), in shards of 250,000
images; D = 100, K = 100; one epoch. The model is (Y + d)·D floats = 44 MB.
`:small` is the same pipeline at 20,000 images (tests).
"""
import ml_collections

from configs import wsabie_synthetic


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = wsabie_synthetic.get_config()
  spec = c.data.synthetic
  del c.data.synthetic, c.data.num_train, c.data.num_test
  c.data.kind = 'shards'
  c.data.shards_dir = '/tmp/wsabie_webscale_shards'
  c.data.synthetic = spec
  c.data.synthetic.num_labels = 100_000
  c.data.synthetic.num_features = 10_000
  c.data.synthetic.nnz = 480         # draws; ~245 distinct non-zeros per image
  c.data.synthetic.signal = 0.35
  c.data.num_train = 10_000_000
  c.data.num_valid = 10_000
  c.data.num_test = 10_000
  c.data.shard_size = 250_000
  c.model.dim = 100
  c.loss.num_draws = 100
  c.train.batch_size = 512
  c.train.num_epochs = 1
  c.train.eval_every_steps = 5000
  c.train.checkpoint_every_steps = 5000
  c.train.patience = 10**6
  if arg == 'small':
    c.data.shards_dir = '/tmp/wsabie_webscale_small'
    c.data.synthetic.num_labels, c.data.synthetic.nnz = 1000, 40
    c.data.num_train, c.data.num_valid, c.data.num_test, c.data.shard_size = 20_000, 500, 500, 3000
    c.train.batch_size = 256
    c.train.eval_every_steps = 40
  elif arg:
    raise ValueError(f'unknown config argument {arg!r} (expected "small")')
  return c

"""Writes a config's synthetic data as shards on disk (train/, valid/, test/).

  python launch/make_shards.py --config=configs/wsabie_webscale.py

Then `launch/train.py` with the same config streams them (data.kind='shards').
"""
import pathlib
import time


from absl import app, flags
from ml_collections import config_flags

from wsabie_jax.data import shards, synthetic_spec

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Config with data.kind=shards.',
                                          lock_config=True)
flags.mark_flags_as_required(['config'])
_WORKERS = flags.DEFINE_integer('workers', 2, 'Processes generating shards in parallel.')


def main(argv):
  del argv
  c = _CONFIG.value.data
  spec = synthetic_spec(c)
  root = pathlib.Path(c.shards_dir)
  for split, n in (('valid', c.num_valid), ('test', c.num_test), ('train', c.num_train)):
    t = time.perf_counter()

    def progress(done, total):
      if done % max(1, total // 10) == 0 or done == total:
        print(f'{split}: shard {done}/{total} ({time.perf_counter() - t:.0f} s)', flush=True)

    meta = shards.write_synthetic(spec, root / split, n, c.shard_size, split, progress,
                                  workers=_WORKERS.value)
    size = sum(f.stat().st_size for f in (root / split).iterdir())
    print(f'{split}: {n:,} images, {sum(s["num_pairs"] for s in meta["shards"]):,} pairs, '
          f'{len(meta["shards"])} shards, {size / 2**30:.2f} GiB, {time.perf_counter() - t:.0f} s')


if __name__ == '__main__':
  app.run(main)

"""Writes a config's synthetic data as shards on disk (train/, valid/, test/).

  python launch/make_shards.py --config=configs/wsabie_webscale.py

Then `launch/train.py` with the same config streams them (data.kind='shards').
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import pathlib
import time

from absl import flags

from wsabie_jax.config.schema import ConfigError
from wsabie_jax.data import shards, synthetic_spec
from wsabie_jax.api import cli

_CONFIG = cli.define_config('Config with data.kind=shards.')
flags.mark_flags_as_required(['config'])
_WORKERS = flags.DEFINE_integer('workers', 2, 'Processes generating shards in parallel.')


def main(argv):
  del argv
  c = _CONFIG.value.data
  if c.get('kind') != 'shards':
    raise ConfigError(f'config.data.kind={c.get("kind")!r}: make_shards writes the shards of a '
                      "config with data.kind='shards' (configs/wsabie_webscale.py)")
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
  cli.main(main)

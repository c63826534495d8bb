"""A streamed call's input built two ways, side by side (launch/benchmark.py --suite=input).

`in place`: each batch gathered straight into its step of the call's stacked
arrays, on the builders' threads (training/dispatch.py `streamed_call`, what
the loop does); `stacked`: each batch built apart, then the call stacked from
them on one thread, a second copy of it. Both over the same steps of the same
stream, its shards loaded and held first (so the loads' time, the same for
both, is left out), alternated run by run.
"""
from __future__ import annotations

import concurrent.futures
import pathlib
import time

import jax
import numpy as np

from wsabie_jax.data import shards
from wsabie_jax.training import dispatch


def _stacked(stream, first: int, n: int, size: int, pool) -> None:
  build = range(first, first + n)
  batches = list(pool.map(stream.batch, build)) if pool else [stream.batch(s) for s in build]
  dispatch.pad_leading(jax.tree.map(lambda *x: np.stack(x), *batches), size)


def _in_place(stream, first: int, n: int, size: int, pool) -> None:
  dispatch.streamed_call(stream, first, n, size, pool=pool)


WAYS = {'in place': _in_place, 'stacked': _stacked}


def compare(shards_dir: str, batch_size: int, threads=(1, 2, 4), steps: int = 2000,
            steps_per_call: int = 64, runs: int = 5) -> list[dict]:
  """Per thread count, each way's pairs/s over `runs` runs (min, median,
  max) and the ratio of the medians, in place ÷ stacked; printed."""
  shard_set = shards.ShardSet(pathlib.Path(shards_dir) / 'train')
  stream = shards.ShardedPairStream(shard_set, batch_size, seed=0)
  stream.shards_held = len(shard_set.num_pairs_S) + shards.AHEAD  # (every one held: no load timed)
  steps = min(steps, stream.num_examples // batch_size)  # one epoch: its shards each once
  dispatch.streamed_call(stream, 0, steps, steps)
  rows = []
  for n in threads:
    pool = concurrent.futures.ThreadPoolExecutor(n) if n > 1 else None
    rates = {way: [] for way in WAYS}
    try:
      for _ in range(runs):
        for way, build in WAYS.items():
          start = time.perf_counter()
          for first in range(0, steps, steps_per_call):
            build(stream, first, min(steps_per_call, steps - first), steps_per_call, pool)
          rates[way].append(steps * batch_size / (time.perf_counter() - start))
    finally:
      if pool:
        pool.shutdown()
    row = {'threads': n, **{way: [min(r), float(np.median(r)), max(r)]
                            for way, r in rates.items()}}
    row['ratio'] = row['in place'][1] / row['stacked'][1]
    rows.append(row)
    print(f'{n:>2} threads: ' + '; '.join(f'{way} {a:,.0f} / {m:,.0f} / {b:,.0f}'
                                          for way, (a, m, b) in
                                          ((w, row[w]) for w in WAYS))
          + f' pairs/s (min / median / max, {runs} runs); in place ÷ stacked '
          f'{row["ratio"]:.2f}', flush=True)
  return rows

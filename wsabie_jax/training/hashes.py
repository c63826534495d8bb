"""SHA-256 of whole data files, each computed once per version of the file.

A run's identity (identity.py) hashes every byte of its inputs, so an edit in
the middle of a 70 MB train.txt is seen. Rehashing 18 GiB of shards at every
resume, evaluate and annotate would cost minutes, so each file's digest is kept
in the user's cache (core/user_cache.py: fingerprints.json) under its real
path with the stat fields that any write changes: size, mtime, ctime (which no
user call can set back), inode and device. A file written in the last
RACY_SECONDS is hashed but not kept: on a file system with coarse times a
second write in the same tick would leave the times equal (git's "racily
clean" rule). The cache is advisory: unreadable, it is rebuilt; unwritable,
every call hashes again.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import os
import pathlib
import time
from typing import Callable, Sequence

from wsabie_jax.core import user_cache

log = logging.getLogger('wsabie_jax')

RACY_SECONDS = 2.0
ANNOUNCE_BYTES = 1 << 30  # hashing more than this says so first (it takes seconds)
_BLOCK = 4 << 20


def cache_path() -> pathlib.Path:
  return user_cache.root() / 'fingerprints.json'


def of_files(paths: Sequence[pathlib.Path], clock: Callable[[], float] = time.time) -> list[str]:
  """The SHA-256 (hex) of each file's whole contents, in order; those whose
  stat matches the cache are not read. Files are hashed on threads (hashlib
  lets go of the GIL), which a folder of shards needs."""
  cache = _load()
  keys = [str(os.path.realpath(p)) for p in paths]
  stats = [_stat(p) for p in paths]
  todo = [i for i, (k, st) in enumerate(zip(keys, stats)) if cache.get(k, {}).get('stat') != st]
  total = sum(stats[i][0] for i in todo)
  if total > ANNOUNCE_BYTES:
    log.info('hashing %.1f GiB of data files (%d); kept in %s for the next run',
             total / (1 << 30), len(todo), cache_path())
  with concurrent.futures.ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
    digests = dict(zip(todo, pool.map(lambda i: _hash(paths[i]), todo)))
  if digests:
    now = clock()
    for i, digest in digests.items():
      size, mtime_ns, ctime_ns, *_ = stats[i]
      if _stat(paths[i]) == stats[i] and now - max(mtime_ns, ctime_ns) / 1e9 >= RACY_SECONDS:
        cache[keys[i]] = {'stat': stats[i], 'sha256': digest}
    _store(cache)
  return [digests[i] if i in digests else cache[keys[i]]['sha256'] for i in range(len(paths))]


def _stat(path) -> list[int]:
  st = os.stat(path)
  return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _hash(path) -> str:
  h = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(_BLOCK), b''):
      h.update(block)
  return h.hexdigest()


def _load() -> dict:
  try:
    cache = json.loads(cache_path().read_text())
  except (OSError, ValueError):
    return {}
  return cache if isinstance(cache, dict) else {}


def _store(cache: dict) -> None:
  """Written whole to a temporary file and renamed: a reader (another process
  of the run) sees the old or the new cache, never half of one."""
  path = cache_path()
  cache = {k: v for k, v in cache.items() if os.path.exists(k)}  # files since deleted
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'{path.name}.{os.getpid()}.tmp')
    tmp.write_text(json.dumps(cache))
    os.replace(tmp, path)
  except OSError as error:
    log.debug('fingerprint cache not written (%s)', error)

"""Fingerprints of whole files (training/hashes.py, identity.py): an edit
anywhere in a file, or in any file of a folder, is seen; the digest of an
unchanged file is read from the cache, not recomputed."""
import hashlib
import os
import time

import numpy as np
import pytest

from wsabie_jax.training import hashes, identity


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
  monkeypatch.setenv('WSABIE_JAX_CACHE', str(tmp_path / 'cache'))


def _edit(path, offset):
  """Flips one byte at `offset` (a same-size edit), putting the times back."""
  st = os.stat(path)
  data = bytearray(path.read_bytes())
  data[offset] ^= 0x01
  path.write_bytes(bytes(data))
  os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _old(path):
  """Dates a file 10 s back, as a data set is (its change time stays now)."""
  t = time.time() - 10
  os.utime(path, (t, t))


@pytest.mark.parametrize('where', ['head', 'middle', 'tail'])
def test_a_same_size_edit_anywhere_in_a_large_file_is_seen(tmp_path, where):
  """A 70 MB train.txt relabelled in its middle third is not resumed on (a
  hash of the first and last MiB alone would pass it). The digest is SHA-256 of every byte (hashlib over the whole file, read here
  independently), and a one-byte edit, times put back, changes it."""
  path = tmp_path / 'train.txt'
  path.write_bytes(np.random.default_rng(0).bytes(3 << 20))  # over 2 × the old ends
  _old(path)
  before = identity.fingerprint(str(path))
  assert before['sha256'] == hashlib.sha256(path.read_bytes()).hexdigest()
  size = path.stat().st_size
  _edit(path, {'head': 10, 'middle': size // 2, 'tail': size - 10}[where])
  after = identity.fingerprint(str(path))
  assert after['bytes'] == before['bytes'] and after['sha256'] != before['sha256']
  assert identity.data_changes({'data': {'data.train_path': before}},
                               {'data': {'data.train_path': after}})


@pytest.mark.parametrize('where', ['top_tail', 'nested_head', 'nested_middle'])
def test_an_edit_in_any_file_of_a_folder_is_seen(tmp_path, where):
  """Each file of a folder (a shard folder) is hashed whole: an edit past its
  first 64 KiB, or in a subfolder's file, does not pass resume."""
  folder = tmp_path / 'shards'
  (folder / 'sub').mkdir(parents=True)
  rng = np.random.default_rng(1)
  top, nested = folder / 'shard-0.npz', folder / 'sub' / 'shard-1.npz'
  for f in (top, nested):
    f.write_bytes(rng.bytes(300 << 10))
    _old(f)
  before = identity.fingerprint(str(folder))
  path, offset = {'top_tail': (top, (300 << 10) - 1), 'nested_head': (nested, 0),
                  'nested_middle': (nested, 150 << 10)}[where]
  _edit(path, offset)
  assert identity.fingerprint(str(folder))['sha256'] != before['sha256']


def test_an_unchanged_file_is_hashed_once(tmp_path, monkeypatch):
  path = tmp_path / 'train.txt'
  path.write_bytes(b'1 1:0.5\n' * 1000)
  _old(path)
  read = []
  real = hashes._hash
  monkeypatch.setattr(hashes, '_hash', lambda p: read.append(p) or real(p))
  later = lambda: time.time() + 10  # past RACY_SECONDS since the write
  first = hashes.of_files([path], clock=later)
  assert hashes.of_files([path], clock=later) == first and len(read) == 1
  _edit(path, 3)  # times put back: the change time still moves
  assert hashes.of_files([path], clock=later) != first and len(read) == 2


def test_a_file_written_just_now_is_not_kept(tmp_path, monkeypatch):
  """Racily clean (git's rule): a file written within RACY_SECONDS of the hash
  could be written again in the same clock tick, times unchanged."""
  path = tmp_path / 'train.txt'
  path.write_bytes(b'x' * 100)
  written = os.stat(path).st_mtime_ns / 1e9
  hashes.of_files([path], clock=lambda: written + hashes.RACY_SECONDS / 2)
  assert str(os.path.realpath(path)) not in hashes._load()
  hashes.of_files([path], clock=lambda: written + hashes.RACY_SECONDS)
  assert str(os.path.realpath(path)) in hashes._load()


def test_an_unreadable_cache_is_rebuilt(tmp_path):
  path = tmp_path / 'train.txt'
  path.write_bytes(b'y' * 100)
  hashes.cache_path().parent.mkdir(parents=True)
  hashes.cache_path().write_text('{not json')
  assert hashes.of_files([path]) == [hashlib.sha256(b'y' * 100).hexdigest()]

"""What a run was trained on: its config and a fingerprint of each data file.

Every checkpoint's record carries `of_run(config)`: the config (less the
fields a resumed run may change) and, for each input path of config.data, its
size and a SHA-256 of all its contents (of a directory: every file's path,
size and SHA-256, subfolders included). Hashing all of a large file is what
notices a line changed in its middle; the cost is paid once per file version:
`hashes.py` keeps each file's hash on this machine, keyed by its size, times
and inode, so a resume or evaluate of an 18 GiB shard folder rereads nothing
that did not change. Resume, evaluate.py and annotate.py compare it
with the config and files they are given and refuse a difference with one
line naming it: before this, a relative path followed the current directory,
a data file edited between runs was trained on as if it were the same, and a
deleted config.json let a resumed run take new settings silently.

Paths are stored absolute (`absolute_paths`), so the run means the same files
from any directory. A moved data set (same contents) is accepted.
"""
from __future__ import annotations

import hashlib
import os
import pathlib

import ml_collections

from wsabie_jax.training import hashes

# config.data keys naming the run's input: files and folders read to train.
INPUT_KEYS = ('train_path', 'test_path', 'labels_path', 'shards_dir', 'featurized_dir',
              'manual_dir')
# ... and where tfds keeps what it prepared from them (made absolute, not fingerprinted).
PATH_KEYS = INPUT_KEYS + ('data_dir',)
# Values an older version wrote that now have another name ('auto' means fitted
# and recorded only): a stored config reads them as the new ones, so its run
# still resumes, evaluates and annotates.
RENAMED = {'model.tables': {'auto': 'by_size'}}


def renamed(key: str, value):
  """A stored field's value under its current name ('section.field', RENAMED)."""
  return RENAMED.get(key, {}).get(value, value) if isinstance(value, str) else value


def upgraded(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A stored config (config.json) with RENAMED values under their new names, in place."""
  for key in RENAMED:
    section, field = key.split('.')
    if section in config and field in config[section]:
      config[section][field] = renamed(key, config[section][field])
  return config


def absolute_paths(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of `config` whose data paths are absolute, with `~` expanded."""
  config = ml_collections.ConfigDict(config.to_dict())
  for key in PATH_KEYS:
    value = config.data.get(key)
    if isinstance(value, str) and value:
      config.data[key] = os.path.abspath(os.path.expanduser(value))
  return config


def inputs(config, keys=INPUT_KEYS) -> dict[str, str]:
  """{'data.KEY': path} for the config's input paths that are set."""
  return {f'data.{k}': config.data[k] for k in keys if isinstance(config.data.get(k), str)
          and config.data.get(k)}


def fingerprint(path: str) -> dict:
  """{'path', 'bytes', 'sha256'} of a file or folder ({'path', 'missing'} when absent)."""
  p = pathlib.Path(path)
  if p.is_file():
    return {'path': path, 'bytes': p.stat().st_size, 'sha256': hashes.of_files([p])[0]}
  if p.is_dir():
    files = sorted(q for q in p.rglob('*') if q.is_file())
    h, total = hashlib.sha256(), 0
    for f, digest in zip(files, hashes.of_files(files)):
      size = f.stat().st_size
      total += size
      h.update(f'{f.relative_to(p)}\0{size}\0{digest}\n'.encode())
    return {'path': path, 'bytes': total, 'sha256': h.hexdigest()}
  return {'path': path, 'missing': True}


def of_run(config, may_change=frozenset()) -> dict:
  """{'config': `config_fields`, 'data': {'data.KEY': fingerprint}}: what a
  checkpoint's record keeps."""
  return {'config': config_fields(config, may_change),
          'data': {key: fingerprint(path) for key, path in inputs(config).items()}}


def config_fields(config, may_change=frozenset()) -> dict:
  """The flattened config less `may_change` and the data paths (read no file)."""
  skip = set(may_change) | {f'data.{k}' for k in PATH_KEYS}
  return {k: _jsonable(v) for k, v in flatten(config.to_dict()).items() if k not in skip}


def data_changes(stored: dict, now: dict, keys=None) -> list[str]:
  """Each input of `stored['data']` whose contents differ in `now['data']`, in
  words (file, sizes); only `keys` when given."""
  out = []
  for key, was in stored.get('data', {}).items():
    if keys is not None and key not in keys:
      continue
    is_ = now['data'].get(key, {'path': '(not set)', 'missing': True})
    if was.get('sha256') == is_.get('sha256') and was.get('bytes') == is_.get('bytes'):
      continue
    if is_.get('missing'):
      out.append(f'{key} {is_["path"]} is missing (trained on {was["path"]}, '
                 f'{was.get("bytes", 0):,} bytes)')
    elif was.get('bytes') != is_.get('bytes'):
      out.append(f'{key} {is_["path"]} has {is_["bytes"]:,} bytes, the run was trained on '
                 f'{was.get("bytes", 0):,}' + _moved(was, is_))
    else:
      out.append(f'{key} {is_["path"]} has other contents than the run was trained on (same '
                 f'size, {is_["bytes"]:,} bytes)' + _moved(was, is_))
  return out


def config_changes(stored: dict, now: dict) -> list[str]:
  """'key (stored → now)' for each config field that differs."""
  was = {k: renamed(k, v) for k, v in stored.get('config', {}).items()}
  is_ = now['config']
  return [f'{k} ({was[k]!r} → {is_.get(k, "absent")!r})' for k in sorted(was)
          if is_.get(k) != was[k]]


def _moved(was: dict, is_: dict) -> str:
  return f' (then at {was["path"]})' if was['path'] != is_['path'] else ''


def flatten(tree: dict, prefix: str = '') -> dict:
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(flatten(value, f'{prefix}{key}.'))
    else:
      out[f'{prefix}{key}'] = value
  return out


def _jsonable(value):
  """As the value reads back from the record's JSON (tuples as lists)."""
  if isinstance(value, (tuple, list)):
    return [_jsonable(v) for v in value]
  return value

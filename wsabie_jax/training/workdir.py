"""What a training run leaves in its workdir, and how to load it back.

  config.json      the config it ran with
  vocabulary.json  label names, feature count, label parents (for psib@k)
  best/, checkpoints/   Orbax checkpoints (best on validation; latest)
  tensorboard/     summaries
  metrics.json     test metrics of the best checkpoint
"""
from __future__ import annotations

import json
import pathlib

import ml_collections
import numpy as np

from wsabie_jax.training import checkpoints


def save_vocabulary(workdir, vocab: dict):
  (pathlib.Path(workdir) / 'vocabulary.json').write_text(json.dumps(vocab))


def load_config(workdir) -> ml_collections.ConfigDict:
  path = pathlib.Path(workdir) / 'config.json'
  if not path.exists():
    raise FileNotFoundError(f'{path} not found: is {workdir} a training workdir?')
  return ml_collections.ConfigDict(json.loads(path.read_text()))


def load_vocabulary(workdir) -> dict:
  vocab = json.loads((pathlib.Path(workdir) / 'vocabulary.json').read_text())
  if vocab['label_parents'] is not None:
    vocab['label_parents'] = np.asarray(vocab['label_parents'], np.int32)
  return vocab


def restore_best(workdir, like_state):
  """The best-on-validation state (the latest checkpoint if none was marked best),
  restored into the shapes of `like_state` (methods/ knows how to make one)."""
  ckpts = checkpoints.Checkpoints(workdir)
  try:
    got = ckpts.restore(ckpts.best, like_state) or ckpts.restore(ckpts.latest, like_state)
  finally:
    ckpts.close()
  if got is None:
    raise FileNotFoundError(f'no checkpoint in {workdir}/best or {workdir}/checkpoints')
  return got[0]

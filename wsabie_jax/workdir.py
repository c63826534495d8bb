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

from wsabie_jax import checkpointing, model


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


def load_best_state(workdir, config: ml_collections.ConfigDict, vocab: dict):
  """The best-on-validation state (the latest checkpoint if none was marked best)."""
  from wsabie_jax import methods  # methods builds on the loop's modules
  like = methods.like_state(config, vocab)
  ckpts = checkpointing.Checkpoints(workdir)
  try:
    got = ckpts.restore(ckpts.best, like) or ckpts.restore(ckpts.latest, like)
  finally:
    ckpts.close()
  if got is None:
    raise FileNotFoundError(f'no checkpoint in {workdir}/best or {workdir}/checkpoints')
  return got[0]


def load_scorer(workdir, config: ml_collections.ConfigDict, vocab: dict):
  """(embed_fn(feat_idx_BxF, feat_val_BxF) -> images_BxD, labels_YxD) of the best checkpoint."""
  from wsabie_jax import methods
  return methods.scorer(config, vocab, load_best_state(workdir, config, vocab))


def load_best_params(workdir, config: ml_collections.ConfigDict, vocab: dict) -> model.Params:
  """WSABIE's best parameters (V, W)."""
  return load_best_state(workdir, config, vocab).params

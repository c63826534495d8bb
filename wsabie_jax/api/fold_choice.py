"""The ensemble's member and weight chosen on folds of the training file
(model.ensemble_choice 'folds'), not on the run's validation split alone.

Paper 000's Table 7 weighs its members "on the validation set using grid
search". A tenth of a small training file is a few dozen images (medical's
33), and there the pair (member, λ) it picks is noise as much as signal:
picked on four fifths of the file instead, medical's p@1 over five folds
rises by 0.012 and scene's by 0.019 (docs/RESULTS.md "The choice on
folds"). So before its own steps a run of the config
trains itself FOLDS more times, each on the training file less one fold
(with its own validation split, schedule and refit, at 1/(FOLDS + 1) of the
budget), scores every (member, λ) of linear_member's grid on the held fold
(`member_grid`), and takes the pair whose MAP pooled over the folds is best
(`pick`). The run then trains that member alone and weighs it at that λ; the
neighbours' votes are still weighed on its validation split. The pair and
the folds' seconds are written into its config (model.ensemble_pick,
model.ensemble_choice_seconds: config.json), so a resumed run reads them
back, and the seconds count in train.max_seconds.
"""
from __future__ import annotations

import json
import logging
import pathlib
import tempfile
import time

import ml_collections
import numpy as np

from wsabie_jax.data import batching, libsvm, load_splits, read_split, settings as data_settings
from wsabie_jax.wsabie import linear_member

log = logging.getLogger('wsabie_jax')

FOLDS = 5
# 'auto' chooses on folds where the training split holds at most this many
# images: there a run stops on patience within seconds (medical, enron,
# scene, yeast: 300-1,350), so FOLDS more fit its budget; Corel5k's 4,050
# use the whole minute.
MAX_IMAGES = 2048
# … and the budget (train.max_seconds) is none or at least this: a shorter
# run spends its seconds on its own steps (the panel's reach reads such runs).
MIN_BUDGET_SECONDS = 30.0
FILES = ('mulan', 'libsvm')  # the data kinds whose training file is cut into folds
FEATURE_KEYS = ('bias_feature', 'normalize', 'standardize')  # the config's treatment, kept
KS = (1, 5)  # the metrics a fold's grid reads (MAP among them)


def auto(num_images: int, ensemble: str, validation_fraction: float, data_kind: str,
         budget_seconds: float = 0.0, processes: int = 1) -> str:
  """model.ensemble_choice 'auto' resolves to: 'folds' where members are
  trained, there is a validation split to choose on (the folds' runs carve
  theirs the same way), the training file is one of FILES and small, the
  budget is none or MIN_BUDGET_SECONDS or more, and one process runs; else
  'validation'."""
  small = num_images <= MAX_IMAGES and processes == 1 and data_kind in FILES and (
      not budget_seconds or budget_seconds >= MIN_BUDGET_SECONDS)
  return 'folds' if linear_member.members(ensemble) and validation_fraction > 0 and small \
      else 'validation'


def chosen(config: ml_collections.ConfigDict, workdir, train_and_evaluate, restore, fit,
           processes: int = 1, clock=time.perf_counter) -> ml_collections.ConfigDict:
  """`config` with model.ensemble_choice resolved ('auto': `auto`, on the
  split and members `fit(config)` gives: (fitted config, values)) and, where
  it is 'folds', model.ensemble_pick and model.ensemble_choice_seconds set:
  read back from `workdir`'s config.json where a run is there to resume
  (None: a new run), else chosen now (`train_and_evaluate(config, workdir)` trains each fold's
  run)."""
  if config.model.get('ensemble_choice', 'validation') == 'validation' or \
      config.model.get('ensemble_pick'):
    return config
  if config.model.ensemble_choice == 'folds' and config.data.kind not in FILES:
    raise ValueError(f"model.ensemble_choice='folds' cuts the training file into folds: "
                     f"data.kind={config.data.kind!r} is not one of {FILES}")
  if config.model.ensemble_choice == 'folds' and processes > 1:  # (each would cut its own)
    raise ValueError(f"model.ensemble_choice='folds' runs in one process, not {processes}: "
                     "choose on the validation split ('validation'), or set model.ensemble_pick")
  fitted, _ = fit(config)
  out = ml_collections.ConfigDict(config.to_dict())
  if out.model.ensemble_choice != 'folds':
    num_images = len(load_splits(fitted.data)[0].label_indptr) - 1
    out.model.ensemble_choice = auto(num_images, fitted.model.ensemble,
                                     fitted.data.validation_fraction, fitted.data.kind,
                                     fitted.train.max_seconds, processes)
  if out.model.ensemble_choice != 'folds':
    return out
  recorded = _recorded(workdir) if workdir is not None else None
  if recorded is not None:
    out.model.ensemble_pick = recorded['ensemble_pick']
    out.model.ensemble_choice_seconds = recorded['ensemble_choice_seconds']
    return out
  start = clock()
  whole = read_split(config.data, config.data.train_path)  # (as the file holds it: a run normalises)
  order = np.random.default_rng(config.seed).permutation(whole.num_images)
  grids, sizes = [], []
  with tempfile.TemporaryDirectory(prefix='wsabie-fold-choice-') as tmp:
    for f, held in enumerate(np.array_split(order, FOLDS)):
      folder = write_fold(whole, held, pathlib.Path(tmp) / str(f))
      train_and_evaluate(fold_config(fitted, folder), folder / 'run')
      grids.append(member_grid(restore(folder / 'run')))
      sizes.append(len(held))
  kind, weight = pick(grids, sizes)
  out.model.ensemble_pick = f'{kind or "none"}:{weight:g}'
  out.model.ensemble_choice_seconds = round(clock() - start, 3)
  log.info('model.ensemble: chose %s on %d folds of the training file (%.1f s)',
           out.model.ensemble_pick, FOLDS, out.model.ensemble_choice_seconds)
  return out


def write_fold(whole, held, folder: pathlib.Path) -> pathlib.Path:
  """`folder` holding train.txt (`whole` less the rows `held`) and test.txt
  (those rows), libsvm, each written whole or not at all (a rename)."""
  folder.mkdir(parents=True, exist_ok=True)
  held = np.sort(held)
  for split, rows in (('train', np.setdiff1d(np.arange(whole.num_images), held)), ('test', held)):
    libsvm.write_libsvm(whole.subset(rows), folder / f'{split}.txt.partial')
    (folder / f'{split}.txt.partial').rename(folder / f'{split}.txt')
  return folder


def fold_config(config, folder: pathlib.Path) -> ml_collections.ConfigDict:
  """The run on one fold: the (fitted) config on `folder`'s files (its
  feature treatment kept), the members the whole run trains, chosen on its
  validation split, in 1/(FOLDS + 1) of the budget."""
  out = ml_collections.ConfigDict(config.to_dict())
  data = data_settings.file_data('libsvm', str(folder / 'train.txt'), str(folder / 'test.txt'))
  out.data = ml_collections.ConfigDict({**data.to_dict(), **{
      k: config.data[k] for k in FEATURE_KEYS + ('validation_fraction', 'split_seed')
      if k in config.data}})
  out.model.ensemble_choice = 'validation'
  out.train.max_seconds = config.train.max_seconds / (FOLDS + 1)
  return out


def member_grid(restored) -> dict:
  """{(member, λ): metrics} on a finished run's test file (a held-out fold;
  `restored`: its api/run.Restored):
  the run's model (its refit where it made one) beside each member of its
  model.ensemble, trained on the whole training file as the refit's chosen
  one is, at each weight of linear_member.WEIGHTS ((None, 0): the model alone)."""
  whole = ml_collections.ConfigDict(restored.config.to_dict())
  whole.data.validation_fraction = 0.0
  train, _, test = load_splits(whole.data)
  members = linear_member.train_members(whole.model.ensemble, train, whole.model, whole.seed)
  # (no workdir: the model alone, without the member the run saved)
  alone = restored.method.scorer(restored.config, restored.vocab, restored.state)
  return linear_member.choose(alone, members, batching.pad_images(test), 'map',
                              {'ks': KS})[2]


def pick(grids: list[dict], sizes: list[int], metric: str = 'map') -> tuple[str | None, float]:
  """The (member, λ) whose `metric` pooled over the folds' grids (each
  weighed by its fold's `sizes`) is best; of equals, the first in the
  grid's order (WSABIE alone, then the smaller λ)."""
  order = list(grids[0])
  pooled = lambda key: sum(g[key][metric] * n for g, n in zip(grids, sizes)) / sum(sizes)
  return max(order, key=lambda key: (pooled(key), -order.index(key)))


def _recorded(workdir) -> dict | None:
  """The model section of the run in `workdir` (its config.json), if it
  chose on folds."""
  path = pathlib.Path(workdir) / 'config.json'
  if not path.is_file():
    return None
  model = json.loads(path.read_text()).get('model', {})
  return model if model.get('ensemble_pick') else None

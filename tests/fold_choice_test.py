"""model.ensemble_choice 'folds' (api/fold_choice.py): the member and λ
chosen on five folds of the training file before the run, recorded in its
config and read back on resume."""
import json

import numpy as np
import pytest

from tests.helpers import QUICK_MEMBERS
from tests.train_test import _tiny_config
from wsabie_jax.api import fold_choice, run
from wsabie_jax.data import libsvm, settings as data_settings
from wsabie_jax.methods import common
from wsabie_jax.wsabie import linear_member


def test_the_pick_is_the_best_map_pooled_by_fold_size():
  grids = [{(None, 0.0): {'map': 0.5}, ('svm', 1.0): {'map': 0.9}, ('svm', 4.0): {'map': 0.1}},
           {(None, 0.0): {'map': 0.5}, ('svm', 1.0): {'map': 0.2}, ('svm', 4.0): {'map': 0.8}}]
  # (0.9·1 + 0.2·3)/4 = 0.375 < 0.5 = WSABIE alone < (0.1·1 + 0.8·3)/4 = 0.625
  assert fold_choice.pick(grids, [1, 3]) == ('svm', 4.0)
  assert fold_choice.pick(grids, [3, 1]) == ('svm', 1.0)  # 0.725
  assert fold_choice.pick(grids, [0, 1]) == ('svm', 4.0)  # (a fold of no weight: left out)
  level = [{(None, 0.0): {'map': 0.5}, ('svm', 1.0): {'map': 0.5}}]
  assert fold_choice.pick(level, [1]) == (None, 0.0)  # of equals, the first


@pytest.mark.parametrize('n, ensemble, fraction, kind, budget, processes, want', [
    (300, 'one_vs_rest+svm', 0.1, 'mulan', 60, 1, 'folds'),    # medical's size, a minute
    (2048, 'svm', 0.1, 'libsvm', 0, 1, 'folds'),               # (0: no budget)
    (2048, 'svm', 0.1, 'libsvm', 30, 1, 'folds'),
    (2048, 'svm', 0.1, 'libsvm', 29, 1, 'validation'),         # a short run: its own steps
    (2049, 'svm', 0.1, 'libsvm', 60, 1, 'validation'),         # Corel5k's 4,050 use their minute
    (300, 'none', 0.1, 'mulan', 60, 1, 'validation'),          # no member to choose
    (300, 'svm', 0.0, 'mulan', 60, 1, 'validation'),           # no split to choose checkpoints on
    (300, 'svm', 0.1, 'synthetic', 60, 1, 'validation'),       # no training file to cut
    (300, 'svm', 0.1, 'mulan', 60, 2, 'validation')])          # several processes
def test_auto_chooses_on_folds_where_the_training_split_is_small(n, ensemble, fraction, kind,
                                                                 budget, processes, want):
  assert fold_choice.auto(n, ensemble, fraction, kind, budget, processes) == want


def _file_config(tmp_path, **train):
  """The tiny synthetic set written as libsvm files, two quick members."""
  config = _tiny_config(**train)
  whole = config.copy_and_resolve_references()
  whole.data.validation_fraction = 0.0
  train_ds, _, test_ds = common.load_splits(whole)
  libsvm.write_libsvm(train_ds, tmp_path / 'train.txt')
  libsvm.write_libsvm(test_ds, tmp_path / 'test.txt')
  config.data = data_settings.file_data('libsvm', str(tmp_path / 'train.txt'),
                                        str(tmp_path / 'test.txt'), validation_fraction=0.1)
  config.model.update(ensemble='one_vs_rest+logistic', ensemble_choice='folds', **QUICK_MEMBERS)
  return config


def test_a_run_chooses_on_folds_records_the_pick_and_reads_it_back(tmp_path, monkeypatch):
  """Five runs on the training file less a fold each, every (member, λ)
  scored on its fold; the pick is the best MAP pooled over them (by hand
  here), the run trains that member alone and tests it at that λ, the
  folds' seconds charged to its budget; a second call on the finished
  workdir reads the pick from config.json and trains no fold again."""
  grids, sizes, chose, grid_of, choose = [], [], [], fold_choice.member_grid, linear_member.choose
  monkeypatch.setattr(fold_choice, 'member_grid', lambda restored: grids.append(
      grid_of(restored)) or sizes.append(restored.evaluate()['num_images']) or grids[-1])
  monkeypatch.setattr(linear_member, 'choose', lambda *a, **k: chose.append(1) or choose(*a, **k))
  config = _file_config(tmp_path, num_epochs=2, eval_every_steps=10)
  got = run.train_and_evaluate(config, tmp_path / 'run')
  assert len(grids) == fold_choice.FOLDS and sum(sizes) == 600
  # The folds' runs chose on their splits, and their grids were scored; the run chose on none.
  assert len(chose) == 2 * fold_choice.FOLDS
  keys = list(grids[0])
  pooled = {key: sum(g[key]['map'] * n for g, n in zip(grids, sizes)) / 600 for key in keys}
  best = max(pooled.values())
  kind, weight = next(key for key in keys if pooled[key] == best)
  recorded = json.loads((tmp_path / 'run' / 'config.json').read_text())['model']
  assert recorded['ensemble_pick'] == f'{kind or "none"}:{weight:g}'
  assert recorded['ensemble_choice'] == 'folds'
  assert (got['ensemble_member'], got['ensemble_weight']) == (kind or 'none', weight)
  assert 0 < recorded['ensemble_choice_seconds'] == got['ensemble_choice_seconds'] \
      <= got['train_seconds']
  again = run.train_and_evaluate(config, tmp_path / 'run')
  assert len(grids) == fold_choice.FOLDS and again['ensemble_pick'] == got['ensemble_pick']


def test_folds_run_in_one_process(tmp_path):
  config = _file_config(tmp_path)
  with pytest.raises(ValueError, match="'folds' runs in one process, not 2"):
    fold_choice.chosen(config, None, None, None, None, processes=2)


def test_folds_need_a_training_file(tmp_path):
  config = _tiny_config(num_epochs=1)
  config.model.update(ensemble='one_vs_rest', ensemble_choice='folds')
  with pytest.raises(ValueError, match="ensemble_choice='folds' cuts the training file"):
    run.train_and_evaluate(config, tmp_path / 'run')
  assert not (tmp_path / 'run').exists()


def test_a_pick_given_is_the_pair_tested_and_a_bad_one_is_named(tmp_path, monkeypatch):
  chose = []
  monkeypatch.setattr(linear_member, 'choose', lambda *a, **k: chose.append(1))
  config = _tiny_config(num_epochs=1)
  config.model.update(ensemble='one_vs_rest+logistic', ensemble_pick='logistic:2', **QUICK_MEMBERS)
  got = run.train_and_evaluate(config, tmp_path / 'run')
  assert (got['ensemble_member'], got['ensemble_weight'], chose) == ('logistic', 2.0, [])
  config.model.ensemble_pick = 'tree:2'
  with pytest.raises(ValueError, match="ensemble_pick='tree:2': expected 'MEMBER:λ'"):
    run.train_and_evaluate(config, tmp_path / 'other')
  assert not (tmp_path / 'other').exists()

"""The 'auto' fields of wsabie/fitting.py against data shapes worked by hand.

Each row of SHAPES is a training split described by its labels alone (Y and
how many positives each image has) and the values the rules' docstring gives
for it, worked out here from the rules, not from the code: Q = ⌈mean
positives⌉ + 1; rows = Σ⌈n/Q⌉ (an image with more than Q positives takes
several rows: B and the large-set rule count rows, not images); B = the power
of two nearest rows/6 in [128, 1024] (rows/24 with shared draws); large when
rows ≥ 6·1024; K = min(Y − 1, 100) (300 shared); labels gathered when
Y > 24·(K + Q) unless model.tables reads them whole; the exact rank where K
covers every negative or where many (Q > 8) positives share labels read
whole; shared draws where a warp step would gather its labels.
"""
import types

import numpy as np
import pytest

from wsabie_jax.api import configs
from wsabie_jax.wsabie import fitting, linear_member


def _split(num_labels: int, positives: dict) -> types.SimpleNamespace:
  """A training split with {positives an image: how many images}."""
  counts = np.concatenate([np.full(n, p) for p, n in positives.items()])
  return types.SimpleNamespace(num_labels=num_labels, num_features=1000, num_seen_labels=None,
                               label_indptr=np.concatenate([[0], np.cumsum(counts)]),
                               num_images=len(counts), feat_idx=np.zeros(0, np.int32),
                               feat_indptr=np.array([0, 10 * len(counts)]))  # 10 values an image


SHAPES = {
    # 3,000 images × 2: Q 3, rows 3,000 → B 512 (500); K 49 covers all 49 negatives: exact.
    'few_labels': (50, {2: 3000}, {}, dict(
        K=49, kind='exact', draws='per_row', violators='all', rate=0.005, Q=3, B=512)),
    # 600 × 1 and 200 × 40: mean 10.75 → Q 12; rows 600 + 200·⌈40/12⌉ = 1,400 → B 256
    # (233; the 800 images would give 128). Q > 8 and labels read whole
    # (2,000 ≤ 24·112): exact at the draws' rate.
    'many_positives': (2000, {1: 600, 40: 200}, {}, dict(
        K=100, kind='exact', draws='per_row', violators='all', rate=0.01, Q=12, B=256)),
    # 3,000 × 2 over Y 5,000 > 24·103: gathered, so shared draws: K 300, B 3,000/24 → 128.
    'shared_draws': (5000, {2: 3000}, {}, dict(
        K=300, kind='warp', draws='per_batch', violators='all', rate=0.01, Q=3, B=128)),
    # The same with the labels read whole by the user's choice: nothing is gathered, so
    # each row draws its own 100: Alg. 1's first violator, B 512.
    'shared_draws_but_tables_whole': (5000, {2: 3000}, {'model.tables': 'labels'}, dict(
        K=100, kind='warp', draws='per_row', violators='first', rate=0.01, Q=3, B=512)),
    # 5,000 × 1 and 500 × 30: mean 3.64 → Q 5; rows 5,000 + 500·6 = 8,000 ≥ 6,144: large
    # (the 5,500 images are not): rate 0.05, B at its ceiling.
    'large_by_rows': (400, {1: 5000, 30: 500}, {}, dict(
        K=100, kind='warp', draws='per_row', violators='first', rate=0.05, Q=5, B=1024)),
    # tmc2007-500's shape: 20,000 × 2 over Y 22: Q 3, rows 20,000 ≥ 6,144: large, and K
    # 21 covers the 21 negatives: the exact rank at the large set's rate, B at its ceiling.
    'large_few_labels': (22, {2: 20000}, {}, dict(
        K=21, kind='exact', draws='per_row', violators='all', rate=0.025, Q=3, B=1024)),
    # A user's Q = 1 (a pair a row): rows are the 3,000 pairs → B 512; Y 3,000 > 24·101.
    'pairs_a_row': (3000, {1: 1000, 2: 1000}, {'train.positives_per_row': 1}, dict(
        K=300, kind='warp', draws='per_batch', violators='all', rate=0.01, Q=1, B=128)),
}


@pytest.mark.parametrize('shape', sorted(SHAPES))
def test_fitted_values_are_the_hand_worked_ones(shape):
  num_labels, positives, overrides, want = SHAPES[shape]
  config = configs.load('wsabie_mulan')
  for name, value in overrides.items():
    section, field = name.split('.')
    config[section][field] = value
  values = fitting.fitted(config, _split(num_labels, positives))
  got = {'K': 'loss.num_draws', 'kind': 'loss.kind', 'draws': 'loss.draws',
         'violators': 'loss.violators', 'rate': 'optim.learning_rate',
         'Q': 'train.positives_per_row', 'B': 'train.batch_size'}
  expected = {field: want[short] for short, field in got.items() if field not in overrides}
  assert {k: values[k] for k in expected} == expected
  estimate = 'first_violator' if want['violators'] == 'first' else 'violator_count'
  assert values['loss.rank_estimate'] == estimate
  # The members beside WSABIE: One-vs-Rest where 1,000 features × Y ≤ 2^26
  # floats, Y ≤ 4,096; the logistic too where it is cheap (linear_member_test
  # pins that rule on the panel's shapes).
  split = _split(num_labels, positives)
  assert values['model.ensemble'].startswith('one_vs_rest' if num_labels <= 4096 else 'none')
  assert values['model.ensemble'] == linear_member.auto(len(split.label_indptr) - 1, 1000,
                                                        num_labels, 'dot',
                                                        num_values=10 * split.num_images)

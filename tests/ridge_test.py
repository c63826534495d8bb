"""baselines/ridge.py against the normal equations, against leave-one-out by
refitting n times, and its MAP against a per-image loop."""
import numpy as np
import pytest

from wsabie_jax.baselines import ridge
from wsabie_jax.data.dataset import SparseDataset


def _data(n: int, d: int, Y: int = 5, seed: int = 0) -> SparseDataset:
  """n images, a third of their d features each (l2-normalised), labels from
  a random linear map of them (the top two, so some rows share labels)."""
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.34)
  X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-9)
  top = np.argsort(-(X @ rng.normal(size=(d, Y)) + 0.3 * rng.normal(size=(n, Y))), axis=1)[:, :2]
  rows, cols = np.nonzero(X)
  return SparseDataset(
      feat_indptr=np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]),
      feat_idx=cols.astype(np.int32), feat_val=X[rows, cols].astype(np.float32),
      label_indptr=np.arange(0, 2 * n + 1, 2), label_idx=np.sort(top, axis=1).ravel().astype(np.int32),
      num_features=d, label_names=[f'y{k}' for k in range(Y)])


SHAPES = [(40, 12), (12, 40)]  # n > d (XᵀX's eigenvalues) and n ≤ d (XXᵀ's)


@pytest.mark.parametrize('n,d', SHAPES)
@pytest.mark.parametrize('lam', [0.05, 1.0, 20.0])
def test_weights_solve_the_normal_equations(n, d, lam):
  train = _data(n, d)
  X, T = ridge.features(train), ridge.signed_targets(train)
  Xd = X.toarray()
  want = np.linalg.solve(Xd.T @ Xd + lam * np.eye(d), Xd.T @ T)
  np.testing.assert_allclose(ridge.weights(X, ridge.spectrum(X, T), lam), want, atol=1e-9)


@pytest.mark.parametrize('n,d', SHAPES)
@pytest.mark.parametrize('lam', [0.1, 3.0])
def test_leave_one_out_scores_are_the_model_trained_without_the_image(n, d, lam):
  train = _data(n, d, seed=1)
  X, T = ridge.features(train), ridge.signed_targets(train)
  Xd = X.toarray()
  rows = np.arange(0, n, 3)
  got = ridge.leave_one_out(ridge.spectrum(X, T), T, lam, rows)
  for k, i in enumerate(rows):
    rest = np.delete(np.arange(n), i)
    W = np.linalg.solve(Xd[rest].T @ Xd[rest] + lam * np.eye(d), Xd[rest].T @ T[rest])
    np.testing.assert_allclose(got[k], Xd[i] @ W, rtol=1e-4, atol=1e-5)


def test_lambda_is_the_grid_s_best_by_leave_one_out_map_from_refits():
  train = _data(30, 10, seed=2)
  X, T = ridge.features(train), ridge.signed_targets(train)
  Xd = X.toarray()
  lam, got = ridge.choose(ridge.spectrum(X, T), T)
  by_refits = {}
  for g in ridge.GRID:
    S = np.stack([Xd[i] @ np.linalg.solve(Xd[r].T @ Xd[r] + g * np.eye(10), Xd[r].T @ T[r])
                  for i in range(30) for r in [np.delete(np.arange(30), i)]])
    by_refits[g] = ridge.mean_average_precision(S, T)
  np.testing.assert_allclose([got[g] for g in ridge.GRID], [by_refits[g] for g in ridge.GRID],
                             atol=1e-6)
  assert lam == max(ridge.GRID, key=lambda g: (by_refits[g], -g))
  assert len(set(np.round(list(by_refits.values()), 6))) > 1  # (the grid's choice is not a tie)
  W, chosen = ridge.train_ridge(train)
  assert chosen == lam and W.dtype == np.float32 and W.shape == (10, 5)
  assert ridge.train_ridge(train, lam=0.7)[1] == 0.7  # (a λ given is kept)


def test_mean_average_precision_against_a_loop_over_images():
  rng = np.random.default_rng(3)
  S = rng.normal(size=(50, 20))
  S[:, 5] = S[:, 6]  # (a tie: broken by label order, as the loop's stable sort)
  T = rng.random((50, 20)) < 0.15
  T[0] = False  # (an image with no label: left out of the mean)
  aps = []
  for s, t in zip(S, T):
    relevant = t[np.argsort(-s, kind='stable')]
    if relevant.any():
      places = np.nonzero(relevant)[0]
      aps.append(np.mean([relevant[:j + 1].sum() / (j + 1) for j in places]))
  assert ridge.mean_average_precision(S, T) == pytest.approx(np.mean(aps), abs=1e-12)


def test_a_set_too_large_for_the_closed_form_is_refused_before_any_work(monkeypatch):
  monkeypatch.setattr(ridge, 'MAX_RANK', 11)
  monkeypatch.setattr(ridge, 'spectrum', lambda *a: pytest.fail('factored anyway'))
  with pytest.raises(ValueError, match=r"'ridge': 40 images × 12 features.*12×12.*past 11"):
    ridge.train_ridge(_data(40, 12))

"""baselines/logistic.py: One-vs-Rest logistic regression and the L2-loss
linear SVM by L-BFGS, against scipy's L-BFGS-B on each label's objective
written out in numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from wsabie_jax.baselines import logistic
from wsabie_jax.data import dataset


def _data(seed=0, n=120, d=15, Y=4):
  """Labels from a noisy linear rule of sparse features (a bias feature last)."""
  rng = np.random.default_rng(seed)
  truth = rng.normal(size=(d, Y))
  rows, labels = [], []
  for _ in range(n):
    idx = np.append(rng.choice(d - 1, size=4, replace=False), d - 1)
    val = np.append(rng.random(4), 1.0).astype(np.float32)
    score = val @ truth[idx] + rng.normal(scale=0.5, size=Y)
    rows.append((idx, val))
    labels.append(np.flatnonzero(score > 0.5))
  return dataset.from_lists(rows, labels, d, [f'l{i}' for i in range(Y)])


def _reference(ds, C, loss='log'):
  """Each label's ½‖w‖² + C Σ ℓ(t w·x) minimised by scipy, in float64: ℓ(m) =
  log(1 + exp(−m)), or max(0, 1 − m)² (loss 'squared_hinge')."""
  X = np.zeros((ds.num_images, ds.num_features))
  np.add.at(X, (np.repeat(np.arange(ds.num_images), np.diff(ds.feat_indptr)), ds.feat_idx),
            ds.feat_val)
  T = 2 * logistic.targets(ds).astype(np.float64) - 1

  def value_and_grad(w, t):
    margin = t * (X @ w)
    if loss == 'squared_hinge':
      slack = np.maximum(0.0, 1.0 - margin)
      return 0.5 * w @ w + C * np.sum(slack ** 2), w - 2 * C * X.T @ (t * slack)
    value = 0.5 * w @ w + C * np.sum(np.logaddexp(0, -margin))
    return value, w - C * X.T @ (t * scipy.special.expit(-margin))

  return np.stack([scipy.optimize.minimize(value_and_grad, np.zeros(X.shape[1]), args=(t,),
                                           jac=True, method='L-BFGS-B',
                                           options={'gtol': 1e-9, 'ftol': 1e-14}).x
                   for t in T.T], 1)


@pytest.mark.parametrize('loss', logistic.LOSSES)
@pytest.mark.parametrize('C', [0.3, 3.0])
@pytest.mark.parametrize('dense', [True, False])
def test_the_weights_are_each_labels_optimum(C, dense, loss, monkeypatch):
  """Dense and non-zero reads of X both reach scipy's optimum label by label."""
  monkeypatch.setattr(logistic, 'DENSE_FLOATS', 2 ** 30 if dense else 0)
  monkeypatch.setattr(logistic, 'SPARSE_SHARE', 0.0)  # (dense means dense)
  ds = _data()
  W, iterations = logistic.train_logistic(ds, C, tolerance=1e-6, loss=loss)
  assert 0 < iterations <= logistic.MAX_ITERATIONS
  np.testing.assert_allclose(np.asarray(W), _reference(ds, C, loss), atol=2e-3, rtol=2e-3)


def test_the_two_losses_differ_and_a_third_is_refused():
  """(The optimum above is the loss asked for: the two losses' optima differ.)"""
  ds = _data(seed=4)
  log_W, _ = logistic.train_logistic(ds, 1.0, tolerance=1e-6)
  svm_W, _ = logistic.train_logistic(ds, 1.0, tolerance=1e-6, loss='squared_hinge')
  assert float(jnp.abs(log_W - svm_W).max()) > 0.1
  with pytest.raises(ValueError, match="'hinge' is not one of"):
    logistic.train_logistic(ds, 1.0, loss='hinge')


def test_the_non_zeros_gradient_is_the_dense_ones(monkeypatch):
  """The row scatters' hand-written transpose (custom_vjp) against autodiff of X·W."""
  ds = _data(seed=1, d=30, Y=5)
  read = {}
  for dense in (True, False):
    monkeypatch.setattr(logistic, 'DENSE_FLOATS', 2 ** 30 if dense else 0)
    monkeypatch.setattr(logistic, 'SPARSE_SHARE', 0.0)
    read[dense] = jax.tree.map(jnp.asarray, logistic._data(ds))
  assert 'X_nxd' in read[True] and 'X_nxd' not in read[False]
  W = jnp.asarray(np.random.default_rng(2).normal(size=(30, 5)), jnp.float32)
  value = {dense: logistic.objective(W, data, 1.0) for dense, data in read.items()}
  np.testing.assert_allclose(value[False], value[True], rtol=1e-5)
  grad = {dense: jax.grad(logistic.objective)(W, data, 1.0) for dense, data in read.items()}
  np.testing.assert_allclose(grad[False], grad[True], rtol=1e-4, atol=1e-4)
  assert float(jnp.abs(grad[True]).max()) > 0.1  # (a gradient that could differ)


def test_x_is_read_as_its_non_zeros_where_few_and_the_cpus_row_kernel_serves():
  """SPARSE_SHARE: 5 of 200 features a row (2.5%) are read as non-zeros on the
  CPU's row kernel, dense without it; 5 of 15 (33%) dense either way."""
  from wsabie_jax.core import native_rows
  few, many = _data(d=200), _data(d=15)
  if jax.default_backend() == 'cpu' and native_rows.available():
    assert 'X_nxd' not in logistic._data(few)
  assert 'X_nxd' in logistic._data(many)
  with native_rows.turned_off():
    assert 'X_nxd' in logistic._data(few)


def test_training_stops_at_the_tolerance_or_the_iterations():
  ds = _data(seed=3)
  _, loose = logistic.train_logistic(ds, 1.0, tolerance=1e-1)
  _, tight = logistic.train_logistic(ds, 1.0, tolerance=1e-7)
  assert loose < tight
  _, capped = logistic.train_logistic(ds, 1.0, iterations=3, tolerance=1e-7)
  assert capped == 3


@pytest.mark.parametrize('loss', logistic.LOSSES)
def test_a_warm_start_reaches_the_optimum_in_fewer_iterations(loss):
  """From the optimum on 90% of the images (the refit's member on the whole
  training file starts from the split's): scipy's optimum on all of them,
  in fewer iterations than from W = 0, both to the tolerance of ‖∇ at 0‖
  (a warm start's own gradient is already small: measured there, the
  tolerance would ask it for more)."""
  ds = _data(seed=5, n=400)
  part, _ = logistic.train_logistic(ds.subset(np.arange(360)), 1.0, tolerance=1e-4, loss=loss)
  cold_W, cold = logistic.train_logistic(ds, 1.0, tolerance=1e-4, loss=loss)
  warm_W, warm = logistic.train_logistic(ds, 1.0, tolerance=1e-4, loss=loss,
                                         start_dxY=np.asarray(part))
  want = _reference(ds, 1.0, loss)
  for W in (cold_W, warm_W):
    np.testing.assert_allclose(np.asarray(W), want, atol=5e-3, rtol=5e-3)
  assert warm < cold, (warm, cold)
  with pytest.raises(ValueError, match=r'start_dxY of shape \(3, 4\)'):
    logistic.train_logistic(ds, 1.0, loss=loss, start_dxY=np.zeros((3, 4)))

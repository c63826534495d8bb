"""baselines/kernel.py: the Gaussian-kernel SVM by Nyström features, against
the exact kernel machine solved by scipy in its representer form, and on a
rule no hyperplane draws."""
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from wsabie_jax.baselines import kernel, logistic
from wsabie_jax.data import batching, dataset


def _dense_set(X_nxd, labels, Y):
  rows = [(np.arange(X_nxd.shape[1]), x.astype(np.float32)) for x in X_nxd]
  return dataset.from_lists(rows, labels, X_nxd.shape[1], [f'l{i}' for i in range(Y)])


def _scored(member, ds):
  padded = batching.pad_images(ds)
  return np.asarray(kernel.kernel_scores(member)(jnp.asarray(padded.feat_idx_nxF),
                                                 jnp.asarray(padded.feat_val_nxF)))


def _rbf(A, B, gamma):
  return np.exp(-gamma * np.sum(np.square(A[:, None] - B[None]), axis=-1))


def test_with_every_image_a_landmark_it_is_the_exact_kernel_machine():
  """Each label's ½αᵀKα + C Σ max(0, 1 − t·Kα)², minimised by scipy in float64
  over α (n), scores new images as k(x, X)·α: the member's scores, to 1%."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(60, 3))
  T = np.stack([X[:, 0] * X[:, 1] > 0, np.sum(X * X, axis=1) > 3], 1)
  train = _dense_set(X, [np.flatnonzero(t) for t in T], 2)
  member, iterations = kernel.train_kernel(train, C=2.0)
  assert member.V_mxY.shape == (60, 2) and iterations < logistic.MAX_ITERATIONS
  gamma = kernel.gamma_of(X)
  assert float(member.gamma) == pytest.approx(1.0 / np.mean(np.sum((X - X.mean(0)) ** 2, 1)))
  K = _rbf(X, X, gamma)

  def value_and_grad(a, t):
    slack = np.maximum(0.0, 1.0 - t * (K @ a))
    return 0.5 * a @ K @ a + 2.0 * np.sum(slack ** 2), K @ a - 4.0 * K @ (t * slack)

  alpha = np.stack([scipy.optimize.minimize(value_and_grad, np.zeros(60), args=(2.0 * t - 1,),
                                            jac=True, method='L-BFGS-B',
                                            options={'gtol': 1e-10, 'ftol': 1e-15}).x
                    for t in T.T.astype(np.float64)], 1)
  new = rng.normal(size=(25, 3))
  want = _rbf(new, X, gamma) @ alpha
  got = _scored(member, _dense_set(new, [[0]] * 25, 2))
  np.testing.assert_allclose(got, want, atol=0.01 * np.abs(want).max())


def test_the_nystrom_features_reproduce_the_kernel_on_the_landmarks():
  """φ(x)·φ(z) = k(x, Z) (K_ZZ + δI)⁻¹ k(Z, z): on the landmarks themselves, k."""
  rng = np.random.default_rng(1)
  Z = rng.normal(size=(30, 4)).astype(np.float32)
  K = kernel._rbf(jnp.asarray(Z), jnp.asarray(Z), 0.3)
  np.testing.assert_allclose(K, _rbf(Z, Z, 0.3), rtol=1e-5, atol=1e-6)
  phi = np.asarray(kernel._whitened(K, kernel.cholesky_factor(K)))
  np.testing.assert_allclose(phi @ phi.T, K, atol=1e-3)


def test_a_factor_float32_cannot_take_is_taken_in_float64():
  """K of 100 identical images is all ones: with δ 1e-10 the float32 sum
  K + δI rounds back to K, whose factor has NaN pivots; the float64 one is
  finite and reproduces K + δI."""
  K = jnp.ones((100, 100), jnp.float32)
  assert not np.all(np.isfinite(np.asarray(kernel._cholesky(K, jnp.float32(1e-10)))))
  L = np.asarray(kernel.cholesky_factor(K, jitter=1e-12), np.float64)
  assert np.all(np.isfinite(L)) and np.allclose(np.tril(L), L)
  np.testing.assert_allclose(L @ L.T, np.ones((100, 100)), atol=1e-6)


def test_a_label_no_hyperplane_draws():
  """Two labels, inside and outside a sphere round the origin: the linear SVM
  (baselines/logistic.py) ranks them by chance, the kernel member nearly always
  right (fixed seed; p@1 over 400 new images)."""
  rng = np.random.default_rng(2)

  def draw(n):
    X = rng.normal(size=(n, 5))
    inside = np.sum(X * X, axis=1) < 4.35  # (the χ²₅ median)
    return _dense_set(X, [[0] if i else [1] for i in inside], 2), inside

  train, _ = draw(500)
  test, inside = draw(400)
  truth = np.where(inside, 0, 1)
  member, _ = kernel.train_kernel(train, C=1.0, max_landmarks=200)
  assert member.V_mxY.shape == (200, 2)  # (landmarks capped)
  kernel_p1 = np.mean(_scored(member, test).argmax(1) == truth)
  U, _ = logistic.train_logistic(train, C=1.0, loss='squared_hinge')
  linear_p1 = np.mean((test.dense_features() @ np.asarray(U)).argmax(1) == truth)
  assert kernel_p1 > 0.9 and linear_p1 < 0.65, (kernel_p1, linear_p1)


def test_sparse_rows_score_as_their_dense_form():
  """kernel_scores reads padded sparse rows: the same scores as k(x, Z)·V on
  the rows written out dense."""
  rng = np.random.default_rng(3)
  member = kernel.KernelMember(rng.normal(size=(8, 5)).astype(np.float32), None,
                               rng.normal(size=(5, 3)).astype(np.float32), np.float32(0.2))
  member = member._replace(z_sq_m=np.sum(member.Z_dxm ** 2, axis=0))
  rows = [(np.array([1, 4, 6]), np.array([0.5, -1.0, 2.0])), (np.array([0]), np.array([1.0]))]
  ds = dataset.from_lists(rows, [[0], [1]], 8, ['a', 'b', 'c'])
  want = _rbf(ds.dense_features(), member.Z_dxm.T, 0.2) @ member.V_mxY
  np.testing.assert_allclose(_scored(member, ds), want, rtol=1e-5, atol=1e-6)

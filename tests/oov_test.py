"""The out-of-vocabulary pass, paper 004 eq. (4)."""
import jax
import numpy as np

from wsabie_jax.skipgram import oov


def test_oov_pass_reduces_eq4_and_leaves_seen_words_untouched():
  rng = np.random.default_rng(0)
  V, D, seen = 120, 16, 80
  initial = rng.normal(0, 0.5, (V, D)).astype(np.float32)
  trained = initial.copy()
  trained[:seen] = initial[:seen] @ np.linalg.qr(rng.normal(size=(D, D)))[0]  # training rotated V_I
  trained[:seen] += rng.normal(0, 0.1, (seen, D))
  before = float(oov.mean_loss(trained, initial, seen, chunk=32))
  fitted = np.asarray(oov.fit_unseen(trained, initial, jax.random.PRNGKey(0), first_unseen=seen,
                                     steps=300, rows_per_step=32, cols_per_step=64))
  after = float(oov.mean_loss(fitted, initial, seen, chunk=32))
  floor = float(oov.mean_loss(initial, initial, seen, chunk=32))  # the targets' own entropy
  np.testing.assert_array_equal(fitted[:seen], trained[:seen])
  assert after < before - 0.5 * (before - floor), (before, after, floor)
  # Snapped into place: unseen words follow the rotation their seen neighbours took.
  r = np.corrcoef((fitted[seen:] @ fitted[:seen].T).ravel(), (initial[seen:] @ initial[:seen].T).ravel())
  assert r[0, 1] > 0.8


def test_mean_loss_is_eq4_averaged():
  rng = np.random.default_rng(1)
  init, now = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
  sig = lambda x: 1 / (1 + np.exp(-x))
  c, s = sig(init[4:] @ init.T), now[4:] @ now.T
  want = -np.mean(c * np.log(sig(s)) + (1 - c) * np.log(1 - sig(s)))
  np.testing.assert_allclose(float(oov.mean_loss(now.astype(np.float32), init.astype(np.float32),
                                                 4, chunk=3)), want, rtol=1e-5)

"""One-vs-Rest kernel machines with the Gaussian (RBF) kernel

  k(x, z) = exp(−γ ‖x − z‖²),

by the Nyström map (Williams & Seeger, NIPS 2001): m landmarks Z drawn from
the training split, whitened by the Cholesky factor K_ZZ + δI = L Lᵀ,

  φ(x) = k(x, Z) · L⁻ᵀ     (m features: φ(x)·φ(z) = k(x, Z) (K_ZZ + δI)⁻¹ k(Z, z)),

on which baselines/logistic.py fits its One-vs-Rest models (the L2-loss SVM
by default, as the SVM member). Where every training image is a landmark
(n ≤ MAX_LANDMARKS) φ reproduces the kernel on the training images, and the
fit is the exact kernel machine min ½ αᵀKα + C Σ ℓ. The linear members rank
by a full-rank hyperplane a label; where the features are few and dense
(scene's 294 colour moments, yeast's 103) a label's images are not a
half-space of them, and a kernel machine separates what a hyperplane cannot
(docs/RESULTS.md "The kernel member").

γ = GAMMA_SCALE / mean_i ‖x_i − x̄‖² over the training split: the kernel
falls to e⁻¹ at the images' mean squared distance from their centre, with
no corpus statistic to tune (scikit-learn's gamma='scale' is the same rule
for standardised features).

δ = JITTER · m (m = tr K_ZZ bounds its largest eigenvalue) keeps L finite in
float32 where landmarks near-duplicate each other, and weighs a direction of
noise they leave (an eigenvalue of K_ZZ near 0) by at most 1/√δ, as a floor on
the eigenvalues at δ would. The factor and its two triangular solves are
m³/3 + n·m² + m²·Y flops, a fraction of an eigendecomposition's time.

Kept as (Z d×m, ‖z‖² m, V = L⁻ᵀ W m×Y, γ): an image scores k(x, Z)·V.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np

from wsabie_jax.baselines import logistic
from wsabie_jax.core import evaluation
from wsabie_jax.data.dataset import SparseDataset

# Landmarks at most by default (model.ensemble_kernel_landmarks): every image
# of the training split up to here (the exact kernel machine). The whitening's
# Cholesky factor is m³/3 flops: 0.15 s at 2,048 on 2 CPU cores.
MAX_LANDMARKS = 2048
GAMMA_SCALE = 1.0
# δ / m, the ridge on K_ZZ's diagonal before its factor (module docstring).
JITTER = 1e-6


class KernelMember(NamedTuple):
  """A trained kernel machine: scores(x) = exp(−γ‖x − z‖²)_z · V."""
  Z_dxm: np.ndarray      # the landmarks, a column each (read by a sparse image's feature ids)
  z_sq_m: np.ndarray     # ‖z‖² of each landmark
  V_mxY: np.ndarray      # Q Λ^(−½) W: the labels' weights over k(x, Z)
  gamma: np.ndarray      # () γ


def gamma_of(X_nxd: np.ndarray) -> float:
  """γ = GAMMA_SCALE / mean ‖x − x̄‖² (module docstring)."""
  spread = float(np.mean(np.sum(np.square(X_nxd - X_nxd.mean(0)), axis=1)))
  return GAMMA_SCALE / max(spread, 1e-12)


def train_kernel(train: SparseDataset, C: float = 1.0, loss: str = 'squared_hinge',
                 seed: int = 0, max_landmarks: int = MAX_LANDMARKS) -> tuple[KernelMember, int]:
  """(the member, L-BFGS iterations taken) on `train`'s features as they are
  (the run's preprocessing done: the same rows evaluate and annotate score)."""
  X_nxd = train.dense_features()
  m = min(train.num_images, max_landmarks)
  landmarks = np.sort(np.random.default_rng(seed).permutation(train.num_images)[:m])
  Z_mxd = jnp.asarray(X_nxd[landmarks])
  gamma = jnp.float32(gamma_of(X_nxd))
  L_mxm = cholesky_factor(_rbf(Z_mxd, Z_mxd, gamma))
  phi_nxm = _whitened(_rbf(jnp.asarray(X_nxd), Z_mxd, gamma), L_mxm)
  W_mxY, iterations = logistic.train_dense(phi_nxm, logistic.targets(train), C=C, loss=loss)
  member = KernelMember(np.asarray(Z_mxd.T), np.asarray(jnp.sum(Z_mxd * Z_mxd, axis=1)),
                        np.asarray(_back(L_mxm, W_mxY)), np.asarray(gamma, np.float32))
  return member, iterations


@jax.jit
def _rbf(A_axd, B_bxd, gamma):
  """k(a, b) for every pair: exp(−γ(‖a‖² + ‖b‖² − 2a·b))."""
  d2 = (jnp.sum(A_axd * A_axd, axis=1)[:, None] + jnp.sum(B_bxd * B_bxd, axis=1)[None]
        - 2.0 * A_axd @ B_bxd.T)
  return jnp.exp(-gamma * jnp.maximum(d2, 0.0))


def cholesky_factor(K_mxm, jitter: float = JITTER) -> jax.Array:
  """L (lower) of K + δI = L Lᵀ, δ = jitter · m. In float32 on the device;
  where that breaks down (a pivot rounded to ≤ 0 leaves NaNs) in float64 on
  the host, which holds for any δ > 0 at these sizes."""
  delta = jitter * K_mxm.shape[0]
  L_mxm = _cholesky(K_mxm, jnp.float32(delta))
  if bool(jnp.all(jnp.isfinite(L_mxm))):
    return L_mxm
  K64 = np.asarray(K_mxm, np.float64) + delta * np.eye(K_mxm.shape[0])
  return jnp.asarray(np.linalg.cholesky(K64), jnp.float32)  # L, lower


@jax.jit
def _cholesky(K_mxm, delta):
  return jnp.linalg.cholesky(K_mxm + delta * jnp.eye(K_mxm.shape[0], dtype=K_mxm.dtype))


@jax.jit
def _whitened(K_nxm, L_mxm):
  """φ = K L⁻ᵀ, by a triangular solve (L⁻¹ Kᵀ)ᵀ."""
  return jax.scipy.linalg.solve_triangular(L_mxm, K_nxm.T, lower=True).T


@jax.jit
def _back(L_mxm, W_mxY):
  """V = L⁻ᵀ W: φ(x)·W = k(x, Z)·V."""
  return jax.scipy.linalg.solve_triangular(L_mxm.T, W_mxY, lower=False)


def kernel_scores(member: KernelMember):
  """score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y for evaluation.evaluate_ranking
  (the member's arrays arguments of one program, as linear.linear_scores')."""
  arrays = tuple(jnp.asarray(a) for a in member)
  return lambda feat_idx_BxF, feat_val_BxF: _kernel_scores(*arrays, feat_idx_BxF, feat_val_BxF)


@jax.jit
def _kernel_scores(Z_dxm, z_sq_m, V_mxY, gamma, feat_idx_BxF, feat_val_BxF):
  # The images written out dense and multiplied: gathering Z's rows by feature
  # id would hold B×F×m floats (620 MB at scene's F 295, m 2,048 and
  # evaluation's B 256). ‖x‖² of its values: an image's feature ids are unique.
  xz_Bxm = evaluation.dense_rows(feat_idx_BxF, feat_val_BxF, Z_dxm.shape[0]) @ Z_dxm
  x_sq_B = jnp.sum(feat_val_BxF * feat_val_BxF, axis=1)
  d2_Bxm = x_sq_B[:, None] + z_sq_m[None] - 2.0 * xz_Bxm
  return jnp.exp(-gamma * jnp.maximum(d2_Bxm, 0.0)) @ V_mxY

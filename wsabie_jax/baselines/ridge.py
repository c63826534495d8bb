"""One-vs-Rest regularised least squares in closed form, its λ chosen by
exact leave-one-out:

  W = argmin_W ‖X W − T‖² + λ ‖W‖²,  t_iy = ±1,

the least-squares classifier every label at once (Rifkin, Yeo & Poggio 2003,
"Regularized least-squares classification"): alone within 0.01 p@1 of the
SVM member or ahead of it on five folds of each panel set but debtags (too
large for it: MAX_RANK), ahead by 0.016–0.044 on enron, yeast and Corel5k,
and solved by one eigendecomposition, not an iterative search. Of the
smaller Gram matrix, XᵀX = Q S Qᵀ (n > d) or X Xᵀ = U S Uᵀ (n ≤ d), it gives
every λ's model at once, and every λ's leave-one-out scores with it (Rifkin & Lippert 2007, "Notes on
regularized least squares"): with the hat matrix H = X (XᵀX + λI)⁻¹ Xᵀ =
A diag(1/(s + λ)) Aᵀ (A = XQ, or U S^½),

  f_−i = (f_i − h_ii t_i) / (1 − h_ii),

the scores image i would get from the model trained without it. So λ comes
from GRID by the mean average precision of those scores over the training
split itself (up to LOO_ROWS of its images), no validation split spent
(docs/RESULTS.md "The ridge member" has it alone and beside WSABIE).

The work is n·d·r for the Gram and A, r³ for its eigenvalues (r = min(n, d)),
and LOO_ROWS·r·Y a λ (in float32): on the host (LAPACK), the eigenvalues in
float64, since at a small λ a float32 eigenvalue's rounding (ε·s_max) is the
size of λ itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from wsabie_jax.core import metrics
from wsabie_jax.data.dataset import SparseDataset

if TYPE_CHECKING:
  import scipy.sparse

# λ's candidates: 10⁻² … 10² in steps of 10^⅓ (the panel's training splits
# choose 0.2–10, the log line `model.ensemble: ridge at λ …`; the config's
# rows have norm √2 with its bias feature).
GRID = tuple(float(x) for x in np.geomspace(1e-2, 1e2, 13))
LOO_ROWS = 2048  # training images whose leave-one-out scores choose λ (a seeded sample past it)
# The smaller side of X at most: its r×r Gram in float64 is 512 MiB at 8,192,
# and its eigenvalues r³ (minutes on 2 CPU cores past it; debtags' r is 11,974).
MAX_RANK = 8192


class Spectrum(NamedTuple):
  """The smaller Gram matrix's eigenvalues and what every λ's model needs."""
  A_nxr: np.ndarray    # XQ (n > d) or U S^½: H = A diag(1/(s + λ)) Aᵀ
  s_r: np.ndarray      # the eigenvalues S, ≥ 0
  C_rxY: np.ndarray    # QᵀXᵀT (n > d) or UᵀT: W = back(diag(1/(s + λ)) C)
  primal: bool         # n > d: W = Q·(…); else W = Xᵀ U·(…)
  basis: np.ndarray    # Q (d×r) or U (n×r)


def features(train: SparseDataset) -> scipy.sparse.csr_matrix:
  """X (n×d, float64) as the run's rows hold it."""
  import scipy.sparse  # here, not at the top: every launch script imports this module (0.2 s)
  return scipy.sparse.csr_matrix(
      (train.feat_val.astype(np.float64), train.feat_idx, train.feat_indptr),
      shape=(train.num_images, train.num_features))


def signed_targets(train: SparseDataset) -> np.ndarray:
  """n×Y: +1 where image i has label y, else −1."""
  T = -np.ones((train.num_images, train.num_labels))
  T[np.repeat(np.arange(train.num_images), np.diff(train.label_indptr)), train.label_idx] = 1.0
  return T


def spectrum(X, T_nxY: np.ndarray) -> Spectrum:
  n, d = X.shape
  if n > d:
    s, Q = np.linalg.eigh(_dense(X.T @ X))
    A = np.asarray(X @ Q)
    return Spectrum(A, np.maximum(s, 0.0), A.T @ T_nxY, True, Q)
  s, U = np.linalg.eigh(_dense(X @ X.T))
  s = np.maximum(s, 0.0)
  return Spectrum(U * np.sqrt(s), s, U.T @ T_nxY, False, U)


def weights(X, sp: Spectrum, lam: float) -> np.ndarray:
  """W (d×Y) at λ: (XᵀX + λI)⁻¹XᵀT = Q diag(1/(s+λ)) QᵀXᵀT, or
  Xᵀ(XXᵀ + λI)⁻¹T = Xᵀ U diag(1/(s+λ)) UᵀT."""
  inner = sp.basis @ (sp.C_rxY / (sp.s_r + lam)[:, None])
  return inner if sp.primal else np.asarray(X.T @ inner)


def leave_one_out(sp: Spectrum, T_nxY: np.ndarray, lam: float, rows: np.ndarray) -> np.ndarray:
  """The scores f_−i (len(rows)×Y) of each image in `rows` under the model
  trained at λ on every image but it (module docstring)."""
  return leave_one_out_at(sp, T_nxY, rows)(lam)


def leave_one_out_at(sp: Spectrum, T_nxY: np.ndarray,
                     rows: np.ndarray) -> Callable[[float], np.ndarray]:
  """λ ↦ `leave_one_out(sp, T_nxY, λ, rows)`; what every λ shares (A's rows,
  their squares, AᵀT) taken once, not once a λ of GRID."""
  A = sp.A_nxr[rows]
  A2 = A * A
  # (F's product in float32, the bulk of a λ's work: a ranking's scores;
  # h in float64, where 1 − h may be small)
  AT = (sp.C_rxY if sp.primal else np.sqrt(sp.s_r)[:, None] * sp.C_rxY).astype(np.float32)
  T = T_nxY[rows]

  def at(lam: float) -> np.ndarray:
    w = 1.0 / (sp.s_r + lam)
    F = ((A * w).astype(np.float32) @ AT).astype(np.float64)
    h = A2 @ w
    return ((F - h[:, None] * T) / (1.0 - h)[:, None]).astype(np.float32)
  return at


def mean_average_precision(S_nxY: np.ndarray, T_nxY: np.ndarray) -> float:
  """Mean over the images with a label of the average precision of the
  ranking S against the labels T > 0, as evaluation ranks and scores it
  (core/metrics.py: ties broken by the lower label id)."""
  some = (T_nxY > 0).any(axis=1)
  if not some.any():
    return 0.0
  S, T = S_nxY[some], T_nxY[some] > 0
  width = int(T.sum(1).max())
  # each image's labels, padded with −1 (metrics' positives)
  pos_nxP = np.where(np.arange(width) < T.sum(1, keepdims=True),
                     np.argsort(~T, axis=1, kind='stable')[:, :width], -1).astype(np.int32)
  ranks, top, _ = metrics.rank_and_top_k_from_scores(jnp.asarray(S, jnp.float32),
                                                     jnp.asarray(pos_nxP), k=1)
  return float(np.mean(metrics.per_image_metrics(np.asarray(ranks), np.asarray(top),
                                                 S.shape[1], ks=(1,))['ap']))


def choose(sp: Spectrum, T_nxY: np.ndarray, seed: int = 0) -> tuple[float, dict]:
  """(λ of GRID whose leave-one-out MAP is best — of equals the smaller —,
  {λ: that MAP}) over up to LOO_ROWS of the training images."""
  n = len(T_nxY)
  rows = (np.arange(n) if n <= LOO_ROWS
          else np.sort(np.random.default_rng(seed).permutation(n)[:LOO_ROWS]))
  scores_at = leave_one_out_at(sp, T_nxY, rows)
  got = {lam: mean_average_precision(scores_at(lam), T_nxY[rows]) for lam in GRID}
  return max(GRID, key=lambda lam: (got[lam], -lam)), got


def train_ridge(train: SparseDataset, lam: float = 0.0, seed: int = 0) -> tuple[np.ndarray, float]:
  """(W d×Y float32, λ) on `train`'s features as they are; λ 0: chosen by
  leave-one-out (`choose`)."""
  reason = too_large(train.num_images, train.num_features)
  if reason:
    raise ValueError(f"model.ensemble 'ridge': {reason}")
  X, T = features(train), signed_targets(train)
  sp = spectrum(X, T)
  if not lam:
    lam = choose(sp, T, seed)[0]
  return weights(X, sp, lam).astype(np.float32), float(lam)


def too_large(num_images: int, num_features: int) -> str | None:
  """Why a training split of these sizes is past the closed form (MAX_RANK), or None."""
  rank = min(num_images, num_features)
  if rank <= MAX_RANK:
    return None
  return (f'{num_images} images × {num_features} features: its closed form factors a '
          f'{rank}×{rank} Gram matrix, past {MAX_RANK} a side; train the svm or logistic '
          'member instead')


def _dense(M) -> np.ndarray:
  return M.toarray() if hasattr(M, 'toarray') else np.asarray(M)  # scipy's sparse, or dense

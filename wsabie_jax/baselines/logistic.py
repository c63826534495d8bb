"""One-vs-Rest linear models, full batch: for every label y,

  min_w  ½‖w‖² + C Σ_i ℓ(t_iy · w·x_i),  t_iy = ±1,
  ℓ(m) = log(1 + exp(−m))   ('log': logistic regression)
  ℓ(m) = max(0, 1 − m)²     ('squared_hinge': the L2-loss linear SVM)

the l2-regularised models liblinear fits a label at a time (its solvers 0
and 2; scikit-learn's `LogisticRegression` and `LinearSVC`, the trees'
nodes in omikuji), here all Y at once as one d×Y problem (the labels'
problems are independent, so their sum is minimised where each is) by
L-BFGS (optax.lbfgs, its zoom line search). The intercept is the data's bias
feature, regularised as liblinear regularises its own. Against paper 000's
PA-I One-vs-Rest (baselines/linear.py: one pass an example, hinge loss) they
converge on the whole training split, which on most of the panel's sets
ranks better (docs/RESULTS.md "The logistic member").

X·W reads X dense where it is small and not mostly zeros, else as its
non-zeros: a row scatter over the rows, and its transpose one over the
columns, each touching nnz·Y entries.
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from wsabie_jax.core import native_rows, row_scatter
from wsabie_jax.data.dataset import SparseDataset

DENSE_FLOATS = 2 ** 25   # X read dense up to n·d this many floats (128 MiB) …
# … unless it holds at most this share of non-zeros and the CPU's row kernel
# reads them (core/native_rows.py): the SVM loss's value and gradient took
# 0.23, 0.39, 0.78 and 0.82 of the dense form's time on medical, Corel5k,
# tmc2007-500 and Delicious (1.0–4.7% held), 1.29 on enron's 8.5%, 8.6 on
# yeast's dense features (fastest of 7 calls each, the kernel on one of the
# 2 CPU cores). An accelerator keeps the dense matmul.
SPARSE_SHARE = 1 / 16
# The products' threads: the row kernel's (each product has the cores to itself).
_THREADS = os.cpu_count() or 1
MAX_ITERATIONS = 100
# Stop where ‖∇‖ ≤ TOLERANCE · ‖∇ at W = 0‖: at zero whatever W the search
# starts from, so a warm start (`start_dxY`) stops where a cold one would.
TOLERANCE = 1e-3
LOSSES = ('log', 'squared_hinge')


def _sparse_product(X, W_dxY):
  """X·W (n×Y) for X's non-zeros X = {'rows', 'cols', 'vals'} in row order
  (n from the targets' rows), its transpose for the gradient read from the
  same non-zeros in column order ('col_rows', 'col_cols', 'col_vals', put in
  that order once by `_data`, not at every gradient). Each is a row scatter,
  out[row] += val·W[col] (core/row_scatter.py: on the CPU one pass with no
  nnz×Y buffer, on every core; Delicious read this way, value and gradient
  0.53 s as segment sums, 0.12–0.14 s on one core, 0.09 s on two, against the
  dense form's 0.17–0.20)."""
  n = X['T_nxY'].shape[0]

  @jax.custom_vjp
  def product(W):
    return row_scatter.add_scaled_rows(jnp.zeros((n, W.shape[1]), W.dtype), X['rows'], X['vals'],
                                       W, X['cols'], at_sorted=True, threads=_THREADS)

  def forward(W):
    return product(W), None

  def backward(_, G_nxY):
    return (row_scatter.add_scaled_rows(jnp.zeros(W_dxY.shape, G_nxY.dtype), X['col_cols'],
                                        X['col_vals'], G_nxY, X['col_rows'], at_sorted=True,
                                        threads=_THREADS),)

  product.defvjp(forward, backward)
  return product(W_dxY)


def _reads_dense(train: SparseDataset) -> bool:
  """X dense where it is small (DENSE_FLOATS), unless it is mostly zeros
  (SPARSE_SHARE) and the CPU's row kernel reads them."""
  cells = train.num_images * train.num_features
  few = len(train.feat_idx) <= SPARSE_SHARE * cells
  return cells <= DENSE_FLOATS and not (few and jax.default_backend() == 'cpu'
                                        and native_rows.available())


def _data(train: SparseDataset) -> dict:
  """The arrays the objective reads: X dense ('X_nxd') or as its non-zeros
  (`_reads_dense`); the targets T."""
  got = {'T_nxY': targets(train)}
  if _reads_dense(train):
    return {**got, 'X_nxd': train.dense_features()}
  rows = np.repeat(np.arange(train.num_images, dtype=np.int32), np.diff(train.feat_indptr))
  cols, vals = train.feat_idx.astype(np.int32), train.feat_val.astype(np.float32)
  by_col = np.argsort(cols, kind='stable')
  return {**got, 'rows': rows, 'cols': cols, 'vals': vals,
          'col_rows': rows[by_col], 'col_cols': cols[by_col], 'col_vals': vals[by_col]}


def targets(train: SparseDataset) -> np.ndarray:
  """n×Y: 1 where image i has label y, else 0."""
  T = np.zeros((train.num_images, train.num_labels), np.float32)
  T[np.repeat(np.arange(train.num_images), np.diff(train.label_indptr)), train.label_idx] = 1
  return T


def objective(W_dxY, data: dict, C, loss: str = 'log'):
  """½‖W‖² + C Σ_iy ℓ(t_iy s_iy), s = X·W, t = 2T − 1."""
  S_nxY = data['X_nxd'] @ W_dxY if 'X_nxd' in data else _sparse_product(data, W_dxY)
  T_nxY = data['T_nxY']
  if loss == 'log':  # log(1 + e^(−ts)) = softplus(s) − T·s, for T ∈ {0, 1}
    losses = jax.nn.softplus(S_nxY) - T_nxY * S_nxY
  else:
    losses = jnp.square(jax.nn.relu(1.0 - (2.0 * T_nxY - 1.0) * S_nxY))
  return 0.5 * jnp.sum(W_dxY * W_dxY) + C * jnp.sum(losses)


@functools.partial(jax.jit, static_argnames=('iterations', 'loss'))
def _minimise(W_dxY, data: dict, C, tolerance, *, iterations: int, loss: str):
  """(W, iterations taken): L-BFGS from W until ‖∇‖ falls to `tolerance` of ‖∇ at 0‖."""
  value = functools.partial(objective, data=data, C=C, loss=loss)
  opt = optax.lbfgs()
  value_and_grad = optax.value_and_grad_from_state(value)
  start = jnp.linalg.norm(jax.grad(value)(jnp.zeros_like(W_dxY)))

  def step(carry):
    W, state, k = carry
    v, g = value_and_grad(W, state=state)
    updates, state = opt.update(g, state, W, value=v, grad=g, value_fn=value)
    return optax.apply_updates(W, updates), state, k + 1

  def going(carry):
    _, state, k = carry
    g = optax.tree.get(state, 'grad')
    return (k < iterations) & ((k == 0) | (jnp.linalg.norm(g) > tolerance * start))

  W_dxY, _, k = jax.lax.while_loop(going, step, (W_dxY, opt.init(W_dxY), 0))
  return W_dxY, k


def train_logistic(train: SparseDataset, C: float = 1.0, iterations: int = MAX_ITERATIONS,
                   tolerance: float = TOLERANCE, loss: str = 'log',
                   start_dxY: np.ndarray | None = None) -> tuple[jax.Array, int]:
  """(W d×Y, L-BFGS iterations taken) of One-vs-Rest logistic regression on
  `train` (loss 'squared_hinge': the L2-loss linear SVM), from W = `start_dxY`
  (a solution on part of these images: the refit's member on the whole
  training file, from the split's) or 0."""
  return _fit(_data(train), train.num_features, C, iterations, tolerance, loss, start_dxY)


def train_dense(X_nxd, T_nxY, C: float = 1.0, iterations: int = MAX_ITERATIONS,
                tolerance: float = TOLERANCE, loss: str = 'log') -> tuple[jax.Array, int]:
  """The same on features given as a dense n×d array (the kernel member's
  Nyström features, baselines/kernel.py) and targets T (`targets`)."""
  return _fit({'X_nxd': X_nxd, 'T_nxY': T_nxY}, X_nxd.shape[1], C, iterations, tolerance, loss)


def _fit(data: dict, num_features: int, C: float, iterations: int, tolerance: float,
         loss: str, start_dxY: np.ndarray | None = None) -> tuple[jax.Array, int]:
  if loss not in LOSSES:
    raise ValueError(f'loss {loss!r} is not one of {LOSSES}')
  shape = (num_features, data['T_nxY'].shape[1])
  if start_dxY is not None and np.shape(start_dxY) != shape:
    raise ValueError(f'start_dxY of shape {np.shape(start_dxY)} is not the problem\'s {shape}')
  W, k = _minimise(jnp.zeros(shape, jnp.float32) if start_dxY is None
                   else jnp.asarray(start_dxY, jnp.float32),
                   jax.tree.map(jnp.asarray, data), jnp.float32(C),
                   jnp.float32(tolerance), iterations=iterations, loss=loss)
  return W, int(k)

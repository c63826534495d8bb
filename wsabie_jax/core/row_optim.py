"""Row-sparse optimisers for embedding tables: SGD and row-wise Adagrad.

A step hands over the rows it gathered and their gradients; only those rows
(and their accumulators) are read, updated, projected (eqs. (2)–(3)) and
written back — O(R·D) per step, never O(rows·D) (docs/DESIGN.md §1, the cost model).

Rows repeat within a batch (a frequent label, a common visual word). No sort
or dedup is needed: scatter-add sums the pieces of a repeated row (its
minibatch gradient), and once every add has landed each copy of the row reads
and projects the same value, so the final scatter-set writes it consistently.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from wsabie_jax.config.schema import check_choices, check_ranges
from wsabie_jax.core import model, row_scatter

OPTIMIZERS = ('sgd', 'adagrad')


def init_accumulator(num_rows: int, optimizer: str, initial_value: float) -> jax.Array:
  """Adagrad keeps one scalar per row; SGD keeps a 1-element placeholder
  (checkpoints cannot hold zero-size arrays)."""
  if optimizer not in OPTIMIZERS:
    raise ValueError(f'optimizer {optimizer!r} is not one of {OPTIMIZERS}')
  size = num_rows if optimizer == 'adagrad' else 1
  return jnp.full((size,), initial_value, jnp.float32)


@dataclasses.dataclass(frozen=True)
class RowOptimSettings:
  """What every method's optim section says of its row-sparse tables'
  optimiser (WSABIE's V and W, the parts model's, skip-gram's word rows):
  the kind and Adagrad's start. A method's section adds its learning rates,
  each a field whose name holds 'learning_rate' (checked > 0), and any `l2`
  (checked ≥ 0): a new rate is one field."""
  kind: str = 'adagrad'         # row-wise Adagrad | 'sgd' (a fixed rate, as the papers)
  adagrad_init: float = 0.1     # each row's accumulator at the start

  def __post_init__(self):
    check_choices(self, {'kind': OPTIMIZERS})
    names = [f.name for f in dataclasses.fields(self)]
    check_ranges(self, 'optim', adagrad_init='>0',
                 **{name: '>0' for name in names if 'learning_rate' in name},
                 **({'l2': '>=0'} if 'l2' in names else {}))


def update_rows(table_NxD: jax.Array, acc_N: jax.Array, rows_R: jax.Array,
                grads_RxD: jax.Array, *, learning_rate: float, optimizer: str,
                max_norm: float, eps: float = 1e-10, dense: bool | None = None,
                l2: float = 0.0, sq_R: jax.Array | None = None):
  """One optimiser step on the given rows, then projection into the ball.

  Row-wise Adagrad: each occurrence of a row adds its mean squared gradient to
  the row's accumulator (as per-example updates would), then every piece is
  scaled by the accumulated value. Returns the new table and accumulator; the
  caller donates the old ones so the scatters happen in place.

  `l2` adds λ·row to each occurrence's gradient (paper 003's regularisation,
  applied as its per-example SGD would: only to the rows an example touches).

  `dense` (default: R ≥ N) projects by one pass over the whole table, masked
  to the touched rows, instead of gathering and re-writing each of the R
  pieces' rows: the same update, and still O(R·D) since N ≤ R; it pays off
  when rows repeat many times (the visual-word table at web scale: B·F = 180k
  pieces on 10k rows), where re-reading and re-writing every repeated row to
  project it dominated the step. Either way the pieces, scaled by their row's
  Adagrad rate, are added into the table in place (no N×D buffer of sums).

  `sq_R`: each piece's mean squared gradient, where the caller has it without
  reading the pieces (RowPieces.sq_R); ignored with l2, which changes them.
  """
  if optimizer not in OPTIMIZERS:
    raise ValueError(f'optimizer {optimizer!r} is not one of {OPTIMIZERS}')
  num_rows = table_NxD.shape[0]
  if l2:
    grads_RxD = grads_RxD + l2 * table_NxD[rows_R]
  if dense is None:
    dense = rows_R.shape[0] >= num_rows
  if sq_R is None or l2:
    sq_R = jnp.mean(jnp.square(grads_RxD), axis=-1)
  acc_N, rate_R = _rates(acc_N, rows_R, sq_R, learning_rate, optimizer, eps)
  table_NxD = table_NxD.at[rows_R].add(-rate_R[:, None] * grads_RxD)
  return _project_touched(table_NxD, rows_R, max_norm, dense), acc_N


def _rates(acc_N: jax.Array, rows_R: jax.Array, sq_R: jax.Array, learning_rate: float,
           optimizer: str, eps: float) -> tuple[jax.Array, jax.Array]:
  """(the accumulator after the pieces, each piece's step size): Adagrad adds
  each piece's mean square to its row's scalar first, then scales by it."""
  if optimizer != 'adagrad':
    return acc_N, jnp.full(rows_R.shape, learning_rate)
  acc_N = acc_N.at[rows_R].add(sq_R)
  return acc_N, learning_rate / (jnp.sqrt(acc_N[rows_R]) + eps)


def _project_touched(table_NxD: jax.Array, rows_R: jax.Array, max_norm: float,
                     dense: bool) -> jax.Array:
  """The table with the rows rows_R named projected into the ball (eqs. (2)–(3)):
  by one masked pass over the table (`dense`) or by gathering the rows."""
  if dense:
    touched_N = jnp.zeros((table_NxD.shape[0],), bool).at[rows_R].set(True)
    return jnp.where(touched_N[:, None], model.project_rows(table_NxD, max_norm), table_NxD)
  return table_NxD.at[rows_R].set(model.project_rows(table_NxD[rows_R], max_norm))


class RowPieces(NamedTuple):
  """A table's gradient as the pieces of the rows a step touched (rows repeat)."""
  rows_R: jax.Array
  grads_RxD: jax.Array
  # Each piece's mean squared gradient (Adagrad), where it costs less than
  # reading the pieces (an embedding's piece x_f·g_b has x_f²·mean(g_b²): O(R)
  # instead of O(R·D)); None: update_rows computes it from the pieces.
  sq_R: jax.Array | None = None


class DenseGrad(NamedTuple):
  """A table's gradient summed per row, for steps that form it by matmul
  (wsabie/table_reads.py): what `update_rows` needs of the pieces, without them."""
  grad_NxD: jax.Array   # Σ of the pieces of each row
  sq_N: jax.Array       # Σ over the pieces of each one's mean squared gradient (Adagrad)
  touched_N: jax.Array  # bool: the rows a piece named (only these are stepped and projected)


def update_dense(table_NxD: jax.Array, acc_N: jax.Array, grad: DenseGrad, *,
                 learning_rate: float, optimizer: str, max_norm: float, eps: float = 1e-10):
  """`update_rows` from per-row sums: the same update (the accumulator grows by
  each piece's mean square, then every row steps by its summed gradient)."""
  if optimizer == 'adagrad':
    acc_N = acc_N + grad.sq_N
  scale_N = 1.0 / (jnp.sqrt(acc_N) + eps) if optimizer == 'adagrad' else jnp.ones_like(grad.sq_N)
  stepped_NxD = table_NxD - (learning_rate * scale_N)[:, None] * grad.grad_NxD
  return (jnp.where(grad.touched_N[:, None], model.project_rows(stepped_NxD, max_norm), table_NxD),
          acc_N)


class EmbeddingPieces(NamedTuple):
  """An embedding table's gradient, factored: images_S = Σ_r val_r·V[rows_r]
  (image src_r) gives piece r = val_r·∂/∂image_{src_r}, kept as the S image
  gradients instead of the R×D pieces. An image whose pairs drew no violator
  has a zero gradient and so do all its pieces: once a model fits, most of a
  batch (a violator in 3–10% of pairs late on the small_text stand-in). So
  `apply` forms and applies only the live pieces when they are few
  (`update_live`), the same update."""
  rows_R: jax.Array
  val_R: jax.Array
  src_R: jax.Array
  g_SxD: jax.Array

  def select(self, sel_C: jax.Array, val_C: jax.Array) -> 'EmbeddingPieces':
    """The pieces sel_C, with values val_C (zero for a filler)."""
    return EmbeddingPieces(self.rows_R[sel_C], val_C, self.src_R[sel_C], self.g_SxD)

  @property
  def sq_R(self) -> jax.Array:
    """Each piece's mean square x²·mean(g²), read off the images: O(R), not O(R·D)."""
    return jnp.square(self.val_R) * jnp.mean(jnp.square(self.g_SxD), -1)[self.src_R]

  def pieces(self) -> RowPieces:
    """The R×D pieces themselves (l2 adds λ·row to each; tests)."""
    return RowPieces(self.rows_R, self.val_R[:, None] * self.g_SxD[self.src_R], self.sq_R)

  @property
  def grads_RxD(self) -> jax.Array:
    return self.pieces().grads_RxD


def update_factored(table_NxD: jax.Array, acc_N: jax.Array, grad: EmbeddingPieces, *,
                    learning_rate: float, optimizer: str, max_norm: float, dense: bool,
                    eps: float = 1e-10):
  """`update_rows` of an EmbeddingPieces' pieces, never formed as an R×D
  array: piece r = val_r·g_{src_r} is scaled by its row's rate and added in
  cache-sized chunks (core/row_scatter.py), the same update."""
  if optimizer not in OPTIMIZERS:
    raise ValueError(f'optimizer {optimizer!r} is not one of {OPTIMIZERS}')
  acc_N, rate_R = _rates(acc_N, grad.rows_R, grad.sq_R, learning_rate, optimizer, eps)
  table_NxD = row_scatter.add_scaled_rows(table_NxD, grad.rows_R, -rate_R * grad.val_R, grad.g_SxD,
                                          grad.src_R)
  return _project_touched(table_NxD, grad.rows_R, max_norm, dense), acc_N


# `update_live` forms at most R / LIVE_SHARE pieces: it runs when no more are
# live, the full update otherwise (all compiled; lax.switch runs one).
LIVE_SHARE = 4
# … and R / LIVE_SHARE_TRAINED where no more are (a model that fits: a few %
# of its pairs draw a violator). Compacting costs a pass over the R pieces
# whatever the cap, so caps between R / 4 and R gain nothing (measured: R / 2
# is no faster than the full update on small_text); one below R / 4 does.
LIVE_SHARE_TRAINED = 16


def compact(live_N: jax.Array, cap: int) -> tuple[jax.Array, jax.Array]:
  """(sel_C, kept_C): the indices of the live entries, padded to the static
  `cap` with index 0, and which of the C are real (the fillers' values are
  to be zeroed by the caller). For a branch that runs when ≤ cap are live."""
  sel_C = jnp.flatnonzero(live_N, size=cap, fill_value=0)
  return sel_C, jnp.arange(cap) < jnp.sum(live_N)


def on_live(live_N: jax.Array, caps, live: Callable, full: Callable, *operands):
  """live(sel_C, kept_C, *operands) with the live entries compacted
  (`compact`) to the smallest of the static `caps` (ascending) that holds
  them, else full(*operands): one lax.switch, every branch compiled."""
  caps = [c for c in caps if c > 0]
  if not caps:
    return full(*operands)
  at_cap = lambda cap: lambda *ops: live(*compact(live_N, cap), *ops)
  branch = jnp.sum(jnp.sum(live_N) > jnp.asarray(caps))  # the full update past the last
  return jax.lax.switch(branch, [at_cap(c) for c in caps] + [full], *operands)


def update_live(table_NxD: jax.Array, acc_N: jax.Array, grad: EmbeddingPieces, **opt):
  """`update_rows` of an EmbeddingPieces' non-zero pieces only, when at most
  R / LIVE_SHARE are: the same update (a zero piece adds nothing to its row
  or its accumulator, and a row's projection into the ball leaves it as it is
  once projected), at a quarter or less of the pieces' cost. The live pieces
  are compacted to the smallest static cap that holds them, R /
  LIVE_SHARE_TRAINED or R / LIVE_SHARE (`on_live`); the slots left over name
  piece 0's row with value 0 (no change; its projection is repeated). Every
  row is in the ball already (initialised so, projected after each step), so
  rows named only by zero pieces need no projection either."""
  R = grad.rows_R.shape[0]
  live_R = (grad.val_R != 0) & jnp.any(grad.g_SxD != 0, -1)[grad.src_R]

  # Projected by one pass over the table where all R pieces would be (its N
  # rows cost no more than the full update's R): fewer pieces do not make
  # gathering and re-writing each one's row cheaper than that pass.
  step = lambda t, a, pieces: update_factored(t, a, pieces, dense=R >= t.shape[0], **opt)

  def live(sel_C, kept_C, t, a):
    return step(t, a, grad.select(sel_C, jnp.where(kept_C, grad.val_R[sel_C], 0)))

  return on_live(live_R, (R // LIVE_SHARE_TRAINED, R // LIVE_SHARE), live,
                 lambda t, a: step(t, a, grad), table_NxD, acc_N)


def apply(table_NxD: jax.Array, acc_N: jax.Array, grad: RowPieces | EmbeddingPieces | DenseGrad,
          *, l2: float = 0.0, **opt):
  """`update_rows`, `update_live` or `update_dense`, whichever form the
  gradient came in (l2 acts on pieces: a DenseGrad has none to add it to; it
  makes every piece live)."""
  if isinstance(grad, DenseGrad):
    if l2:
      raise ValueError('l2 needs the gradient as row pieces, not summed per row')
    return update_dense(table_NxD, acc_N, grad, **opt)
  if isinstance(grad, EmbeddingPieces):
    if l2:
      grad = grad.pieces()
    else:
      return update_live(table_NxD, acc_N, grad, **opt)
  return update_rows(table_NxD, acc_N, grad.rows_R, grad.grads_RxD, l2=l2, sq_R=grad.sq_R, **opt)

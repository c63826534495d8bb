"""Paper 002's settings: the config sections model, loss and optim, field for field."""
from __future__ import annotations

import dataclasses

from wsabie_jax.config.schema import MethodSettings, check_choices, check_ranges
from wsabie_jax.core import precision
from wsabie_jax.core import row_optim


@dataclasses.dataclass(frozen=True)
class PartsModel:
  dim: int = 64                 # D
  max_norm: float = 1.0         # ‖W_i‖, ‖V_i‖ ≤ 1 (§4.3.3 step 6)
  shared: bool = True           # f_I reads W (Shared) or its own U (Unshared)
  alpha: float = 0.1            # f_L's weight in f_q (§6.2)
  score: str = 'dot'            # f_I is a dot product (read by image annotation)
  matmul_precision: str = 'float32'  # the step's matmuls (core/precision.py)

  def __post_init__(self):
    check_choices(self, {'score': ('dot',), 'matmul_precision': precision.PRECISIONS})
    check_ranges(self, 'model', dim='>=1', max_norm='>0', alpha='>=0')


@dataclasses.dataclass(frozen=True)
class PartsLoss:
  num_draws: int = 100          # γ: parallel candidates per quadruplet
  margin: float = 1.0

  def __post_init__(self):
    check_ranges(self, 'loss', num_draws='>=1', margin='>=0')


@dataclasses.dataclass(frozen=True)
class PartsOptim(row_optim.RowOptimSettings):
  learning_rate_V: float = 0.05
  learning_rate_W: float = 0.05  # W and U


@dataclasses.dataclass(frozen=True)
class PartsConfig(MethodSettings):
  """Paper 002's settings: V embeds an image's features, W the K objects and
  parts; the "Unshared" model (model.shared=False) scores images by a table U
  of its own (§6)."""
  num_labels: int               # K, read from the data
  model: PartsModel = PartsModel()
  loss: PartsLoss = PartsLoss()
  optim: PartsOptim = PartsOptim()

"""Paper 004's settings: the config sections model (the image tower), loss and
optim, field for field."""
from __future__ import annotations

import dataclasses

import optax

from wsabie_jax.config.schema import MethodSettings, check_choices, check_ranges
from wsabie_jax.core import precision
from wsabie_jax.core import row_optim
from wsabie_jax.skipgram import objectives
from wsabie_jax.skipgram import tower as tower_lib

NEGATIVES = ('frequency', 'adjacent')


@dataclasses.dataclass(frozen=True)
class TowerConfig:
  widths: tuple[int, ...] = (1024, 300)   # the tower's hidden widths, then D (the words')
  score: str = 'dot'            # images and words meet by the dot product
  matmul_precision: str = 'float32'  # the step's matmuls (core/precision.py)

  def __post_init__(self):
    check_choices(self, {'score': ('dot',), 'matmul_precision': precision.PRECISIONS})
    if not self.widths or min(self.widths) < 1:
      raise ValueError(f'model.widths={self.widths} must be ≥ 1 each (the last is D)')


@dataclasses.dataclass(frozen=True)
class SkipGramLoss:
  kind: str = 'xent'            # 'xent' (eq. (1)) | 'fast0tag' (eq. (5))
  sampled: bool = True          # False: the full objective over all tags
  num_positives: int = 5        # P (§2.2: the knee of Fig. 2(c))
  num_negatives: int = 10       # N
  negatives: str = 'frequency'  # the tag distribution | 'adjacent' image's tags (§3.3)
  negative_power: float = 1.0   # negatives ∝ tag count^power
  alpha: float = 0.01           # eq. (1)'s co-occurrence weight
  beta: float = 1.0             # eq. (5)'s scale
  joint: bool = True            # optimise the word vectors (the paper's "Opt")

  def __post_init__(self):
    check_choices(self, {'kind': objectives.LOSSES, 'negatives': NEGATIVES})
    check_ranges(self, 'loss', num_positives='>=1', num_negatives='>=1', negative_power='>=0',
                 alpha='>=0', beta='>0')


@dataclasses.dataclass(frozen=True)
class SkipGramOptim(row_optim.RowOptimSettings):  # (`kind`: the word rows')
  tower_learning_rate: float = 1e-3  # Adam, the tower
  learning_rate: float = 0.05   # the word rows


@dataclasses.dataclass(frozen=True)
class SkipGramConfig(MethodSettings):
  """Paper 004's settings."""
  num_features: int             # d, read from the data
  num_tags: int                 # |V_I|: the tags seen in training, word rows 0..num_tags−1
  model: TowerConfig = TowerConfig()
  loss: SkipGramLoss = SkipGramLoss()
  optim: SkipGramOptim = SkipGramOptim()

  @property
  def tower(self) -> tower_lib.ImageTower:
    return tower_lib.ImageTower(self.num_features, tuple(self.model.widths))

  @property
  def tower_optimizer(self) -> optax.GradientTransformation:
    return optax.adam(self.optim.tower_learning_rate)

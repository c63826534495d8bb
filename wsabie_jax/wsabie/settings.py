"""WSABIE's settings: the config sections model, loss and optim, field for
field (config/schema.py writes their defaults out and reads them back)."""
from __future__ import annotations

import dataclasses
import itertools
from typing import Annotated

from wsabie_jax.config.schema import AUTO, UNBOUNDED, MethodSettings, check_choices, check_ranges
from wsabie_jax.core import model, precision, row_optim
from wsabie_jax.wsabie import warp

LOSSES = ('warp', 'auc', 'exact', 'softmax')
PAIRWISE = ('hinge', 'logistic')
SAMPLERS = ('uniform', 'adaptive')
TABLES = ('by_size', 'rows', 'whole', 'labels', 'features')
DRAWS = ('per_row', 'per_batch')
ENSEMBLE_MEMBERS = ('one_vs_rest', 'logistic', 'svm', 'ridge', 'kernel')  # (wsabie/linear_member.py MEMBERS)
# 'none', or members joined by '+' in ENSEMBLE_MEMBERS' order ('one_vs_rest+svm')
ENSEMBLES = ('none',) + tuple('+'.join(c) for r in range(1, len(ENSEMBLE_MEMBERS) + 1)
                              for c in itertools.combinations(ENSEMBLE_MEMBERS, r))


def draws_can_be_shared(kind: str, sampler: str, score: str, l2: float) -> bool:
  """Whether loss.draws='per_batch' applies: WARP's uniform draws (AUC would
  compare every row with the same negative), scored and differentiated by a
  matmul (dot scores, no l2 on the pieces). The exact rank draws nothing."""
  return kind in ('warp', 'exact', AUTO) and sampler == 'uniform' and score == 'dot' and not l2


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  dim: int = 64                 # D
  # C in eqs. (2)–(3); float('inf'): unconstrained (paper 003's protocol).
  max_norm: Annotated[float, UNBOUNDED] = 1.0
  score: str = 'dot'            # 'dot' | 'neg_euclidean' (paper 001) | 'neg_sq_euclidean'
  # The training step's matmuls (core/precision.py): full float32 by default, so the
  # violator test against the margin is exact; 'tensorfloat32' / 'bfloat16' trade it for speed.
  matmul_precision: str = 'float32'
  init_std: float = 0.0         # rows ~ N(0, init_std²) before projection; 0: 1/√d (paper 000)
  # How the step reads the tables (wsabie/table_reads.py): 'rows' gathers the touched rows
  # (the cost model); 'whole' reads both by matmuls ('labels' / 'features': that one);
  # 'by_size' reads a table whole where that is faster (small tables), decided
  # for each compiled step from its shapes (table_reads.choose).
  tables: str = 'by_size'
  # Paper 000 Table 7's ensemble (wsabie/linear_member.py): 'one_vs_rest' trains the
  # paper's One-vs-Rest model (PA-I, C = ensemble_C, ensemble_epochs epochs),
  # 'logistic' One-vs-Rest logistic regression (C = ensemble_logistic_C), 'svm' the
  # L2-loss linear SVM (C = ensemble_svm_C), 'ridge' regularised least squares
  # in closed form (λ = ensemble_ridge_lambda; baselines/ridge.py), 'kernel' the
  # L2-loss SVM with the Gaussian kernel (C = ensemble_kernel_C;
  # baselines/kernel.py), before WSABIE's steps, and adds its
  # standardised scores at the weight the validation split picks (0 included);
  # 'one_vs_rest+logistic' (any '+' of them): each trained, validation picks the
  # member too; 'auto': those whose cost is small for the data and the budget
  # (linear_member.auto).
  ensemble: str = 'none'
  ensemble_C: float = 0.1
  ensemble_epochs: int = 10
  ensemble_logistic_C: float = 1.0  # (scikit-learn's default; liblinear's objective)
  ensemble_svm_C: float = 1.0       # (liblinear's default)
  # The ridge member's λ; 0: chosen by its exact leave-one-out scores on the
  # training split (baselines/ridge.py GRID).
  ensemble_ridge_lambda: float = 0.0
  ensemble_kernel_C: float = 1.0    # (libsvm's default)
  # The kernel member's landmarks at most (baselines/kernel.py): its cost is
  # m³ + n·m² to make its features and n·m·Y a pass.
  ensemble_kernel_landmarks: int = 2048
  # The members (of those trained; '+'-joined, or 'none') trained on the
  # features' tf-idf weighting (idf from the training split, rows
  # l2-normalised), as the tree libraries are fed; stored as diag(idf)·U,
  # which the ensemble's per-image standardisation makes the same model (the
  # linear members only).
  ensemble_idf: str = 'none'
  # Where the member and λ are chosen (api/fold_choice.py): 'validation'
  # (the run's validation split), 'folds' (runs of the config on 5 folds of
  # the training file first, the pair of the best MAP pooled over their
  # held-out folds; their seconds count in the budget), 'auto' (folds on
  # small training splits: fold_choice.auto). A run records the pair chosen on
  # folds as ensemble_pick ('svm:4'; 'none:0': WSABIE alone; a user may set
  # one) and their seconds as ensemble_choice_seconds.
  ensemble_choice: str = 'validation'
  ensemble_pick: str = ''
  ensemble_choice_seconds: float = 0.0
  # k > 0: the tested ensemble gains the votes of each image's k nearest
  # training images in WSABIE's embedding space, weighed on the validation
  # split (wsabie/neighbours.py); 0: none; 'auto': k = 30 on training splits
  # of a size it suits (neighbours.auto).
  neighbours: Annotated[int, AUTO] = 0

  def __post_init__(self):
    check_choices(self, {'score': model.SCORES, 'matmul_precision': precision.PRECISIONS,
                         'tables': TABLES, 'ensemble': ENSEMBLES + (AUTO,),
                         'ensemble_idf': ENSEMBLES,
                         'ensemble_choice': ('validation', 'folds', AUTO)})
    check_ranges(self, 'model', dim='>=1', max_norm='>0', init_std='>=0',  # init_std 0: 1/√d
                 ensemble_C='>0', ensemble_epochs='>=1', ensemble_logistic_C='>0',
                 ensemble_svm_C='>0', ensemble_ridge_lambda='>=0', ensemble_kernel_C='>0',
                 ensemble_kernel_landmarks='>=1',
                 neighbours='>=0', ensemble_choice_seconds='>=0')
    if self.ensemble_pick:
      kind, _, weight = self.ensemble_pick.partition(':')
      if kind not in ENSEMBLE_MEMBERS + ('none',) or not _is_number(weight):
        raise ValueError(f"model ensemble_pick={self.ensemble_pick!r}: expected 'MEMBER:λ' "
                         f"(MEMBER one of {ENSEMBLE_MEMBERS + ('none',)}, λ a number), or ''")
    if 'kernel' in self.ensemble_idf.split('+'):
      raise ValueError(f"model ensemble_idf={self.ensemble_idf!r}: the kernel member is not "
                       "kept as a d×Y table to weigh by idf; name the linear members only")
    if self.neighbours not in (0, AUTO) and self.score != 'dot':
      raise ValueError(f"model neighbours={self.neighbours!r} standardises dot-product scores: "
                       "it needs score='dot'")
    if self.ensemble not in ('none', AUTO) and self.score != 'dot':
      raise ValueError(f"model ensemble={self.ensemble!r} standardises dot-product scores: it "
                       "needs score='dot'")


@dataclasses.dataclass(frozen=True)
class LossConfig:
  # 'warp' (Alg. 1) | 'auc' (one negative, plain hinge) | 'exact' (OWPC-SGD) |
  # 'softmax' (sampled softmax over the K draws, log-q corrected: objective.py) |
  # 'auto': exact where K covers every negative, else warp (wsabie/fitting.py)
  kind: str = 'warp'
  num_draws: Annotated[int, AUTO] = 100  # K, the fixed budget of parallel draws
  # 'per_row': each row draws its own K (Alg. 1); 'per_batch': the batch's rows share
  # K draws, scored by one B×K matmul (wsabie/batch_draws.py; warp, uniform, dot only);
  # 'auto': per_batch where the labels are too many to read whole (wsabie/fitting.py)
  draws: str = 'per_row'
  sampler: str = 'uniform'      # 'uniform' (Alg. 1) | 'adaptive' (VSE-ens, paper 003 Alg. 1)
  rank_scale: float = 0.01      # adaptive: λ relative to Y (mean drawn rank ≈ λ·Y)
  refresh_every_pairs: int = 0  # adaptive: re-sort the lists after this many pairs (0: Y·ln Y)
  rank_weights: str = 'harmonic'  # α_j = 1/j | 'mean_rank' | 'top1'
  rank_estimate: str = 'first_violator'  # ⌊(Y−1)/N⌋ | 'violator_count'
  violators: str = 'first'      # 'first' (Alg. 1) | 'all': every violator among the K draws
                                # ('auto', both: fitted to the positives a row, wsabie/fitting.py)
  margin: float = 1.0
  pairwise: str = 'hinge'       # the pair term: |margin − f_y + f_ȳ|₊ (eq. (9)) | 'logistic':
                                # log(1 + e^(f_ȳ − f_y)), paper 003's Opt-AUC (every draw counts)
  label_chunk: int = 4096       # exact: labels scored at once (memory O(B·label_chunk))

  def __post_init__(self):
    check_ranges(self, 'loss', num_draws='>=1', margin='>=0', label_chunk='>=1',
                 refresh_every_pairs='>=0')
    check_choices(self, {'kind': LOSSES + (AUTO,), 'pairwise': PAIRWISE, 'rank_weights': warp.RANK_WEIGHTS,
                          'rank_estimate': warp.RANK_ESTIMATES + (AUTO,),
                          'violators': warp.VIOLATORS + (AUTO,),
                          'sampler': SAMPLERS, 'draws': DRAWS + (AUTO,)})
    if self.draws == 'per_batch' and not draws_can_be_shared(self.kind, self.sampler, 'dot', 0):
      raise ValueError("loss draws='per_batch' shares uniform draws between a batch's rows for "
                       "WARP: it needs kind='warp' and sampler='uniform' (AUC would compare every "
                       "row with the same negative)")
    if self.kind == 'exact' and self.pairwise != 'hinge':
      raise ValueError("loss kind='exact' counts the rank by the hinge: pairwise must be 'hinge'")
    if self.sampler == 'adaptive':
      if self.kind == 'exact':
        raise ValueError("sampler='adaptive' draws negatives; loss kind='exact' scores every label")
      if self.kind == 'warp' and (self.violators, self.rank_estimate) not in (
          ('all', 'violator_count'), (AUTO, AUTO)):
        raise ValueError("sampler='adaptive' with loss kind='warp' weights every violator by "
                         "importance (warp.importance_weights): set violators='all', "
                         "rank_estimate='violator_count'")
      if not 0 < self.rank_scale <= 1:
        raise ValueError(f'rank_scale={self.rank_scale} must be in (0, 1] (λ relative to Y)')


@dataclasses.dataclass(frozen=True)
class OptimConfig(row_optim.RowOptimSettings):
  learning_rate: Annotated[float, AUTO] = 0.1
  l2: float = 0.0               # λ·row added to each touched row's gradient (paper 003: 0.01)


@dataclasses.dataclass(frozen=True)
class StepConfig(MethodSettings):
  """WSABIE's settings."""
  num_labels: int               # Y, read from the data
  model: ModelConfig = ModelConfig()
  loss: LossConfig = LossConfig()
  optim: OptimConfig = OptimConfig()

  def __post_init__(self):
    if self.loss.draws == 'per_batch' and not draws_can_be_shared(
        self.loss.kind, self.loss.sampler, self.model.score, self.optim.l2):
      raise ValueError("loss draws='per_batch' scores the shared draws by a matmul and forms "
                       "their gradients from it: it needs model.score='dot' and optim.l2=0")

  @property
  def draws_shared(self) -> bool:
    """Whether a batch's rows share their K draws (wsabie/batch_draws.py);
    the exact rank draws nothing."""
    return self.loss.draws == 'per_batch' and self.loss.kind == 'warp'

  @property
  def draws_per_pair(self) -> int:
    # AUC with uniform draws needs one; adaptive draws may hit positives, so
    # AUC takes the first of K that is not (rejection with a fixed budget).
    return 1 if self.loss.kind == 'auc' and self.loss.sampler == 'uniform' else self.loss.num_draws


def _is_number(text: str) -> bool:
  try:
    float(text)
  except ValueError:
    return False
  return True

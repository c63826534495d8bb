"""Paper 000 Table 7's ensemble as a trained configuration: WSABIE with a
full-rank model beside it (model.ensemble):

  f(x) = z(f_WSABIE(x)) + λ · z(g(x)),  z: standardised over the labels per image

The member g is one of MEMBERS, linear g(x) = x·U (U d×Y, a row a label) but
the last:
  'one_vs_rest'  the paper's One-vs-Rest (§6.3, PA-I: baselines/linear.py)
  'logistic'     One-vs-Rest logistic regression to convergence (baselines/logistic.py)
  'svm'          One-vs-Rest L2-loss linear SVM (squared hinge) to convergence (the same)
  'ridge'        One-vs-Rest regularised least squares, closed form, λ by exact
                 leave-one-out (baselines/ridge.py)
  'kernel'       the L2-loss SVM with the Gaussian kernel, g(x) = k(x, Z)·V over
                 landmarks Z of the training split (baselines/kernel.py)

The two rank differently: WSABIE through a rank-D map shared by the labels,
the member with a full-rank row a label. Table 7 combines models "with weights
chosen on the validation set using grid search"; here the member (where the
run trains several, 'one_vs_rest+logistic+svm') and λ come from the grid members
× WEIGHTS by the run's selection metric, with WSABIE's best state (the one
that never saw the validation split), and λ = 0 keeps WSABIE alone. The
members train on the same training split before WSABIE's steps, in seconds
that count in the run's budget (docs/RESULTS.md "The One-vs-Rest member";
'auto' trains fewer in a budget under a minute: `budget_share`),
and the chosen one is saved beside the checkpoints (`FILE`: its arrays and
λ), where evaluate and annotate read it.
"""
from __future__ import annotations

import functools
import logging
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.baselines import ensemble, kernel, linear, logistic, ridge
from wsabie_jax.core import evaluation
from wsabie_jax.data import dataset
from wsabie_jax.training import saved_arrays
from wsabie_jax.wsabie import settings

log = logging.getLogger('wsabie_jax')

FILE = 'one_vs_rest.npz'
MEMBERS = settings.ENSEMBLE_MEMBERS  # ('one_vs_rest', 'logistic', 'svm', 'ridge', 'kernel')
LINEAR = MEMBERS[:4]  # the members kept as a d×Y table U (model.ensemble_idf's)
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)  # λ's grid (0: WSABIE alone)
# 'auto' trains a member where its table fits this many floats (256 MiB), the
# labels are few enough that evaluation may score them as a Y×Y identity, and
# the score is the dot product it standardises; …
MAX_TABLE_FLOATS = 2 ** 26
MAX_LABELS = 4096
# … and the logistic one where the training split is dense-readable
# (logistic.DENSE_FLOATS) and an L-BFGS pass costs at most this many
# multiply-adds (n·d·Y): a few seconds on 2 CPU cores (Corel5k's 7·10⁸ 2 s) …
MAX_LOGISTIC_PRODUCT = 2 ** 31
# … and the SVM one up to this many: Delicious' 6·10⁹ take 8 s of its 60 on
# 2 CPU cores (X read as its non-zeros: logistic.SPARSE_SHARE), and pay (5
# folds of its training file: +0.0029 ± 0.0011 p@1 against One-vs-Rest alone
# beside WSABIE; docs/RESULTS.md "The SVM member").
MAX_SVM_PRODUCT = 2 ** 33
# … and the kernel one on at most this many images (its n×m features cost
# n·m² to make, over m = min(n, kernel.MAX_LANDMARKS) landmarks) where its
# L-BFGS pass, n·m·Y, is at most this many multiply-adds: the sets of a few
# thousand images (Corel5k's 4,050 × 2,048 × 374: 6.5 s on 2 CPU cores), not
# tmc2007-500's 19,000 nor Delicious' 11,600.
MAX_KERNEL_PRODUCT = 2 ** 32
MAX_KERNEL_IMAGES = 2 * kernel.MAX_LANDMARKS
# … and One-vs-Rest where its PA-I epochs touch at most this many entries
# (non-zeros · Y · epochs): every panel set's at a minute (debtags' 3·10⁹) …
MAX_OVR_WORK = 2 ** 32
# … in a run of a minute or more (or none); a shorter budget scales every
# limit down in proportion (`budget_share`). The ridge member is not among
# them: beside the others it moved the folds' p@1 by nothing on four sets and
# by −0.007 on enron (docs/RESULTS.md "The ridge member").
REFERENCE_SECONDS = 60.0
# The members baselines/logistic.py fits: kind → (its loss, the model field holding its C)
LBFGS_MEMBERS = {'logistic': ('log', 'ensemble_logistic_C'),
                 'svm': ('squared_hinge', 'ensemble_svm_C')}


def members(ensemble: str) -> tuple[str, ...]:
  """The member kinds model.ensemble names ('none': none; 'a+b': both)."""
  return () if ensemble == 'none' else tuple(ensemble.split('+'))


def auto(num_images: int, num_features: int, num_labels: int, score: str,
         landmarks: int = kernel.MAX_LANDMARKS, num_values: int | None = None,
         epochs: int = 10, budget_seconds: float = 0.0) -> str:
  """model.ensemble 'auto' resolves to: the members that fit data of these
  sizes (the kernel member's cost at `landmarks`, model.ensemble_kernel_landmarks;
  One-vs-Rest's at `num_values` non-zeros, n·d where None, over `epochs`,
  model.ensemble_epochs) and a budget of `budget_seconds` (0: none):
  `budget_share`."""
  if not (num_features * num_labels <= MAX_TABLE_FLOATS and num_labels <= MAX_LABELS
          and score == 'dot'):
    return 'none'
  share = budget_share(budget_seconds)
  dense = num_images * num_features <= logistic.DENSE_FLOATS
  product = num_images * num_features * num_labels
  kernel_product = num_images * min(num_images, landmarks) * num_labels
  values = num_images * num_features if num_values is None else num_values
  return '+'.join(['one_vs_rest'] * (values * num_labels * epochs <= share * MAX_OVR_WORK)
                  + ['logistic'] * (dense and product <= share * MAX_LOGISTIC_PRODUCT)
                  + ['svm'] * (dense and product <= share * MAX_SVM_PRODUCT)
                  + ['kernel'] * (dense and num_images <= MAX_KERNEL_IMAGES
                                  and kernel_product <= share * MAX_KERNEL_PRODUCT)) or 'none'


def budget_share(budget_seconds: float) -> float:
  """What share of its limits above a member's cost may reach in a run of
  `budget_seconds` (train.max_seconds; 0: no budget, the whole limit): the
  limits are a minute's (REFERENCE_SECONDS), and a shorter budget scales them
  down, so a member takes no larger share of a short run's seconds than of a
  minute's. The members train before the steps: under the whole limits a
  1-s run on Corel5k took 8 s and 16 steps to test p@1 0.414, with none 1 s
  and 270 steps to 0.440 (docs/RESULTS.md "The members in a short budget")."""
  return 1.0 if not budget_seconds else min(1.0, budget_seconds / REFERENCE_SECONDS)


def train(kind: str, train_ds, model_cfg, seed: int, start=None):
  """A member on the training split: its weights U (d×Y), or the kernel
  member's kernel.KernelMember. `start`: the same kind's member on part of
  these images, where the L-BFGS members (logistic, svm) start their search
  (the refit's, on the whole training file: Delicious' SVM member reached
  the cold search's gradient norm in under half its iterations; 'Refit on
  the whole training file', docs/TUNING.md); the others start afresh.
  One-vs-Rest: PA-I's W averaged over the ends of its second half of epochs
  (alone on debtags' validation split: MAP 0.8451 against the last W's
  0.8410). Logistic: the l2-regularised optimum at C =
  model.ensemble_logistic_C. A member of
  model.ensemble_idf trains on the rows' tf-idf weighting x̃ = x⊙idf / ‖x⊙idf‖
  and is kept as diag(idf)·U: x·(diag(idf)·U) = ‖x⊙idf‖ · x̃·U, the trained
  scores times a positive number an image, which the ensemble's
  standardisation over the labels (`_summed`) divides out, so evaluate and
  annotate score it on the features as they are."""
  if kind in members(model_cfg.ensemble_idf):
    idf_d = dataset.idf(train_ds)  # (≥ 1: a start's diag(idf)·U divides back)
    U = _trained(kind, dataset.idf_weighted(train_ds, idf_d), model_cfg, seed,
                 None if start is None else start / idf_d[:, None])
    return idf_d[:, None] * U
  return _trained(kind, train_ds, model_cfg, seed, start)


def _trained(kind: str, train_ds, model_cfg, seed: int, start=None):
  if kind == 'one_vs_rest':
    U = linear.train_linear(train_ds, 'ovr', C=model_cfg.ensemble_C,
                            epochs=model_cfg.ensemble_epochs, seed=seed, average=True)
  elif kind in LBFGS_MEMBERS:
    loss, C_field = LBFGS_MEMBERS[kind]
    U, iterations = logistic.train_logistic(train_ds, C=getattr(model_cfg, C_field), loss=loss,
                                            start_dxY=start)
    log.info('model.ensemble: %s took %d L-BFGS iterations%s', kind, iterations,
             '' if start is None else ', from the split\'s solution')
  elif kind == 'ridge':
    U, lam = ridge.train_ridge(train_ds, model_cfg.ensemble_ridge_lambda, seed)
    log.info('model.ensemble: ridge at λ %.3g%s', lam,
             '' if model_cfg.ensemble_ridge_lambda else ' (by leave-one-out)')
    return U
  elif kind == 'kernel':
    member, iterations = kernel.train_kernel(train_ds, C=model_cfg.ensemble_kernel_C, seed=seed,
                                             max_landmarks=model_cfg.ensemble_kernel_landmarks)
    log.info('model.ensemble: kernel took %d L-BFGS iterations over %d landmarks, γ %.3g',
             iterations, member.V_mxY.shape[0], member.gamma)
    return member
  else:
    raise ValueError(f'model.ensemble member {kind!r} is not one of {MEMBERS}')
  return np.asarray(jax.device_get(U))


def train_members(ensemble: str, train_ds, model_cfg, seed: int) -> dict:
  """{kind: its member (`train`)} of every member model.ensemble names, on the training split."""
  return {kind: train(kind, train_ds, model_cfg, seed) for kind in members(ensemble)}


def combined(wsabie_scorer, member, weight: float):
  """The ensemble as the (embed_fn, labels) pair evaluation and annotation rank
  with: an image's "embedding" is its Y combined scores, the labels the
  identity (dot scores read them back). λ = 0: WSABIE's own scorer (the
  member may be None)."""
  if not weight:
    return wsabie_scorer
  return _at(_weighed(wsabie_scorer, member), weight, wsabie_scorer)


def member_scores(member):
  """score_fn(feat_idx_BxF, feat_val_BxF) -> B×Y of a member (`train`)."""
  if isinstance(member, kernel.KernelMember):
    return kernel.kernel_scores(member)
  return linear.linear_scores(member)


def _weighed(wsabie_scorer, member):
  """scores(feat_idx, feat_val, λ) of the ensemble. Every table and λ are
  arguments of the programs, so one program serves every weight of the grid,
  every state and every member of a shape (closed over by a function jitted
  here, they would be constants of a new program each time: a d×Y member
  is 5M floats on debtags)."""
  embed, W_YxD = wsabie_scorer
  theirs = member_scores(member)
  return lambda i, v, weight: _summed(embed(i, v), W_YxD, theirs(i, v), weight)


@jax.jit
def _summed(images_BxD, W_YxD, member_BxY, weight):
  """z(f_WSABIE) + λ · z(x·U)."""
  return (ensemble.standardised(images_BxD @ W_YxD.T)
          + weight * ensemble.standardised(member_BxY))


def _at(scores, weight: float, wsabie_scorer):
  """The (embed_fn, labels) pair of `scores` at a weight λ > 0."""
  weight_ = jnp.float32(weight)
  return (lambda i, v: scores(i, v, weight_)), identity(wsabie_scorer[1].shape[0])


@functools.partial(jax.jit, static_argnums=0)
def identity(num_labels: int):
  """The Y×Y identity a member's scores are ranked against (its "labels"):
  one program (jnp.eye run op by op is five)."""
  return jnp.eye(num_labels, dtype=jnp.float32)


def choose(wsabie_scorer, members_dxY: dict, padded_valid, metric: str,
           eval_kw: dict) -> tuple[str | None, float, dict]:
  """(member, λ, {(member, λ): validation metrics}): the member of
  `members_dxY` ({kind: its member, `train`}) and weight of WEIGHTS whose ensemble scores best on
  `metric` on the validation split (of equals, the smaller λ, then the first
  member); member None where λ = 0 (WSABIE alone) wins."""
  got = {(None, 0.0): evaluation.evaluate_ranking(*wsabie_scorer, padded_valid, **eval_kw)}
  for kind, member in members_dxY.items():
    scores = _weighed(wsabie_scorer, member)
    for w in WEIGHTS[1:]:
      got[kind, w] = evaluation.evaluate_ranking(*_at(scores, w, wsabie_scorer), padded_valid,
                                                 **eval_kw)
  order = list(got)
  kind, weight = max(order, key=lambda k: (got[k][metric], -k[1], -order.index(k)))
  chose = f'{kind} at λ {weight:g}' if kind else 'WSABIE alone'
  log.info('model.ensemble: valid %s by the member and its weight λ: %s; chose %s', metric,
           ', '.join(f'{k or "alone"} {w:g} {m[metric]:.4f}' for (k, w), m in got.items()), chose)
  return kind, weight, got


def save(workdir, member, weight: float, kind: str = 'one_vs_rest') -> None:
  """`FILE` in workdir, written whole or not at all (a rename): a linear
  member's U_dxY, the kernel member's arrays by their names. λ = 0 (WSABIE
  alone chosen) keeps the choice, not the tables: U is stored 0×0."""
  if not weight:
    arrays = {'U_dxY': np.zeros((0, 0), np.float32)}
  elif isinstance(member, kernel.KernelMember):
    arrays = member._asdict()
  else:
    arrays = {'U_dxY': member}
  saved_arrays.write(pathlib.Path(workdir) / FILE, **arrays, weight=np.float32(weight),
                           kind=np.str_(kind))


def load(workdir) -> dict | None:
  """The saved member ({'member': U d×Y or a kernel.KernelMember, 'weight',
  'kind'}), or None where the run has none. (A damaged file fails its zip
  checksums: an error naming it.)"""
  def read(got):
    kind = str(got['kind']) if 'kind' in got else 'one_vs_rest'
    weight = float(got['weight'])
    member = (kernel.KernelMember(*(got[f] for f in kernel.KernelMember._fields))
              if kind == 'kernel' and weight else got['U_dxY'])
    return {'member': member, 'weight': weight, 'kind': kind}
  return saved_arrays.read(pathlib.Path(workdir) / FILE, 'the ensemble member',
                                 'train the run again, or delete the file to use WSABIE alone',
                                 read)

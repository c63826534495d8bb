"""The rows of paper 003's Tables 2 and 4: one negative sampler and loss per row.

  warp       uniform WARP (paper 000 Alg. 1: K parallel uniform draws, first violator)
  vse_hinge  VSE-ens as the paper: adaptive draws (paper 003 Alg. 1), plain hinge
             against the first draw that is not a positive
  vse_warp   adaptive draws with WARP weighting: every violator among the K draws,
             the rank estimated by importance sampling (warp.importance_weights)
  auc        one uniform negative, plain hinge ("Opt-AUC" / paper 000's AUC)

Every row gets the same optimiser, data, budget and validation schedule, so the
time to reach 95% of the best validation p@5 compares the samplers.
"""
import ml_collections

ROWS = ('warp', 'vse_hinge', 'vse_warp', 'auc')


def apply_row(c: ml_collections.ConfigDict, row: str, adaptive_draws: int,
              rank_scale: float) -> ml_collections.ConfigDict:
  if row not in ROWS:
    raise ValueError(f'unknown row {row!r} (expected one of {ROWS})')
  c.train.select_metric = 'p@5'
  if row == 'warp':
    c.train.probe_pairs = 1000  # paper 003 Fig. 1: draws uniform WARP needs per update
  elif row == 'auc':
    c.loss.kind = 'auc'
  else:
    c.loss.update(sampler='adaptive', num_draws=adaptive_draws, rank_scale=rank_scale)
    if row == 'vse_hinge':
      c.loss.kind = 'auc'
    else:
      c.loss.update(kind='warp', violators='all', rank_estimate='violator_count')
  return c

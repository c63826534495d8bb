"""What the launch scripts and notebooks call: train a config into a workdir,
restore a workdir's best model, evaluate it, annotate with it."""
from __future__ import annotations

import jax
import ml_collections

from wsabie_jax import methods
from wsabie_jax.training import checkpoints, identity, loop, workdir as workdir_lib
from wsabie_jax.api import fold_choice


def train_and_evaluate(config: ml_collections.ConfigDict, workdir, force_new: bool = False,
                       allow_data_change: bool = False) -> dict:
  """Trains config.method (resuming from workdir), tests the best checkpoint,
  writes metrics.json and returns its contents. The config is checked first
  (methods.check: a ConfigError before the workdir is touched); `force_new`
  moves a previous run in workdir aside instead of resuming it;
  `allow_data_change` resumes on data files that changed since."""
  config = methods.check(config)
  if config.method == 'wsabie':  # (the member and λ chosen on folds first, where asked)
    config = fold_choice.chosen(config, None if force_new else workdir, train_and_evaluate,
                                Restored, methods.get('wsabie').fit, jax.process_count())
  return loop.train_and_evaluate(config, workdir, methods.build, force_new, allow_data_change)


# The figures a summary line shows, first found first (methods name theirs differently).
_HEADLINE = (('p@1', 'p@1'), ('p@5', 'p@5'), ('map', 'MAP'), ('annot_p@1', 'annotation p@1'),
             ('annot_map', 'annotation MAP'), ('iw_pair_map', 'pair MAP'))


def summary_line(metrics: dict, split: str = 'test') -> str:
  """One line a person reads at the end of a run: the headline metrics, the
  frequency baseline's beside them, and the training's steps, time and speed."""
  shown = [(key, name) for key, name in _HEADLINE if key in metrics][:3]
  line = f'{split} ' + '  '.join(f'{name} {metrics[key]:.3f}' for key, name in shown)
  freq = [f'{metrics["freq_" + key]:.3f}' for key, _ in shown if 'freq_' + key in metrics]
  if freq:
    line += f'   (frequency: {" ".join(freq)})'
  if 'steps' in metrics:
    rate = metrics.get('train_examples_per_sec', 0.0)
    line += (f'   {metrics["steps"]:,} steps, {metrics.get("train_seconds", 0.0):.0f} s, '
             f'{rate / 1000:,.1f}k pairs/s')
  if metrics.get('refit_steps'):
    line += f', refit on the whole training file ({metrics["refit_steps"]:,} steps)'
  return line


class Restored:
  """A workdir's config, vocabulary and best state, with its method.

  `reads`: the config.data inputs the caller will read ('all', or keys such as
  'data.labels_path'), checked against the files the run was trained on
  (identity.py): a difference is a WorkdirError naming it, unless
  `allow_data_change`."""

  def __init__(self, workdir, reads='all', allow_data_change: bool = False):
    self.workdir = workdir
    self.config = workdir_lib.load_config(workdir)
    self.vocab = workdir_lib.load_vocabulary(workdir)
    self.method = methods.of(self.config)
    self.state, record = workdir_lib.restore_best(
        workdir, self.method.like_state(self.config, self.vocab))
    stored = record.get('identity')
    if stored and not allow_data_change:
      keys = set(stored['data']) if reads == 'all' else set(reads) & set(stored['data'])
      now = {'data': {k: identity.fingerprint(p) for k, p in identity.inputs(self.config).items()
                      if k in keys}}
      changed = identity.data_changes(stored, now, keys)
      if changed:
        raise workdir_lib.WorkdirError(
            f'{workdir} was trained on other data: {"; ".join(changed)}; put the files back, '
            'or pass --allow_data_change to use these')

  def latest_state(self):
    """The latest checkpoint's state (where a resumed run would start), in the
    best's shape; the best state when checkpoints/ holds none."""
    ckpts = checkpoints.Checkpoints(self.workdir)
    try:
      got = ckpts.restore(ckpts.latest, self.state)
    finally:
      ckpts.close()
    return self.state if got is None else got[0]

  def scorer(self):
    """(embed_fn(feat_idx_BxF, feat_val_BxF) -> images_BxD, labels_YxD)."""
    return self.method.scorer(self.config, self.vocab, self.state, self.workdir)

  def evaluate(self, split: str = 'test', baseline: bool = False) -> dict:
    return self.method.evaluate(self.config, self.vocab, self.state, split, baseline,
                                self.workdir)

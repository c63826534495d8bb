"""Re-evaluates the best checkpoint of a training workdir on its test split.

  python launch/evaluate.py --workdir=/tmp/run [--split=valid] [--baseline]

Prints the metrics and writes DIR/eval_<split>.json (metrics.json is left as
training wrote it). --baseline also scores the most-frequent-labels baseline.
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a clone

from absl import app, flags, logging

from wsabie_jax import evaluation, methods, workdir as workdir_lib
from wsabie_jax.data import batching, load_splits

_WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
_SPLIT = flags.DEFINE_enum('split', 'test', ['test', 'valid'], 'Which split to score.')
_BASELINE = flags.DEFINE_bool('baseline', False, 'Also score the frequency baseline.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  config = workdir_lib.load_config(_WORKDIR.value)
  trainset, valid, test = load_splits(config.data)
  vocab = workdir_lib.load_vocabulary(_WORKDIR.value)
  embed, labels_YxD = workdir_lib.load_scorer(_WORKDIR.value, config, vocab)
  split = test if _SPLIT.value == 'test' else valid
  split = methods.seen_labels_only(split, trainset)
  padded = batching.pad_images(split)
  kw = dict(methods.eval_kwargs(config, trainset), label_parents=split.label_parents)
  result = evaluation.evaluate_ranking(embed, labels_YxD, padded, **kw)
  if _BASELINE.value:
    counts = trainset.label_frequencies()[:split.num_labels]
    base = evaluation.evaluate_frequency_baseline(counts, padded, **kw)
    result.update({f'freq_{k}': v for k, v in base.items()})
  out = pathlib.Path(_WORKDIR.value) / f'eval_{_SPLIT.value}.json'
  out.write_text(json.dumps(result, indent=2, sort_keys=True))
  print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == '__main__':
  app.run(main)

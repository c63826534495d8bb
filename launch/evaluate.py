"""Re-evaluates the best checkpoint of a training workdir on its test split.

  python launch/evaluate.py --workdir=/tmp/run [--split=valid] [--baseline]

Prints the metrics and writes DIR/eval_<split>.json (metrics.json is left as
training wrote it). --baseline also scores the most-frequent-labels baseline.
Objects-and-parts workdirs report their three tasks on the split's fixed quadruplets.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import json
import os
import pathlib

from absl import flags, logging

from wsabie_jax.core import metrics
from wsabie_jax.api import cli, run

_WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
_SPLIT = flags.DEFINE_enum('split', 'test', ['test', 'valid'], 'Which split to score.')
_JSON = flags.DEFINE_bool('json', False, 'Print every metric as JSON instead of the summary line.')
_BASELINE = flags.DEFINE_bool('baseline', False, 'Also score the frequency baseline.')
_ALLOW_DATA_CHANGE = flags.DEFINE_bool('allow_data_change', False, 'Score data files that '
                                       'changed since the run was trained.')


def main(argv):
  del argv
  cli.use_compilation_cache()
  logging.set_verbosity(logging.WARNING)
  if os.path.isdir(_WORKDIR.value):  # (else its one-line error comes at once)
    cli.say(f'evaluating {_WORKDIR.value} on its {_SPLIT.value} split (reading the run and its '
            'data; a first run on this machine compiles)')
  restored = run.Restored(_WORKDIR.value, allow_data_change=_ALLOW_DATA_CHANGE.value)
  result = metrics.for_file(restored.evaluate(_SPLIT.value, _BASELINE.value))
  # Printed before they are written: a read-only workdir loses no figure.
  if _JSON.value:
    print(json.dumps(result, indent=2, sort_keys=True), flush=True)
  else:
    print(run.summary_line(result, _SPLIT.value), flush=True)
  out = pathlib.Path(_WORKDIR.value) / f'eval_{_SPLIT.value}.json'
  out.write_text(json.dumps(result, indent=2, sort_keys=True))
  if not _JSON.value:
    print(f'(every metric: {out})')


if __name__ == '__main__':
  cli.main(main)

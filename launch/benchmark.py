"""Speed and scale figures, printed as tables and written as JSON.

  python launch/benchmark.py --suite=all --out=benchmark.json
  python launch/benchmark.py --suite=lightfm --budget_seconds=130   # needs lightfm

Suites:
  step_cost  seconds per step at Y, d ∈ {1,000, 100,000} (same B, K, D, nnz):
             the cost model says a step never depends on Y or d.
  lightfm    this project and LightFM's WARP side by side, same data, same D,
             same wall-clock budget, 2 threads each: examples/s, test p@1/p@10,
             first- vs last-epoch speed, ratios. Data: synthetic (n = 200,000,
             Y = 10,000, d = 10,000, ~50 non-zeros) and Corel5k.
  eval       exact top-10 over Y = 100,000 labels: images/s and peak memory.
  loop       the training loop's end-to-end pairs/s (steps only) at steps_per_call 1
             and 16 beside the step alone, for the default job and the lightfm
             suite's synthetic settings.
  accelerator  (by name; needs LightFM) the step alone (on a repeated and on
             fresh batches) vs the loop end to end at B ∈ {1,024, 4,096},
             K ∈ {100, 1,000}, D = 100, Y ∈ {10k, 100k, 1M}, steps_per_call 1
             and the platform's default (and the cost of train.deterministic);
             ours vs LightFM with every CPU thread on the synthetic data (time
             to LightFM's final test p@1); the Corel5k config's pairs/s; the
             shipped configs end to end with the values each fitted (the
             web-scale epoch too with --accelerator_webscale_shards); the
             Mulan config's B, 2B and 4B at equal wall-clock; --panel_config on
             each --panel set beside the peers (the peers suite's) on every CPU
             thread, and ours' seconds on the device to the best one's p@1.
             python launch/benchmark.py --suite=accelerator --budget_seconds=45
             (--accelerator_tables=grid --accelerator_labels=100000: part of it)
  panel      (by name; needs LightFM) one config file on every data set of a panel
             (--panel_config, default configs/wsabie_mulan.py) vs LightFM's WARP with
             max_sampled 10 and Y at the config's D, 2 threads: test p@1,
             p@5, MAP, pairs/s and epochs at each budget (read off one run as long
             as the largest), the ratios, and the seconds ours takes to reach the
             better LightFM's 60-s p@1. Sets: 'corel5k', a Mulan folder
             (NAME-train.arff, NAME-test.arff, NAME.xml), libsvm:TRAIN:TEST, or a
             stand-in standin:text, standin:many_labels, standin:many_tags
             (benchmarks/standins.py, written once under $WSABIE_JAX_CACHE);
             holdout:SET: SET's training file alone, a fifth held out as its test file.
             python launch/benchmark.py --suite=panel --panel=corel5k,DIR/enron,…,standin:text
             (--panel_override=train.select_metric=p@1: ours with one setting changed;
             --panel_seeds=3: every system at seeds 0-2, each cell mean ± standard error)
  panel_search  (by name) panel_search.SEARCH[--panel_round]'s settings for configs/wsabie_mulan.py, each
             trained --budget_seconds on every panel set's training file less a 20%
             validation split and scored there (test files unread); with
             --panel_search_peer, LightFM on the same splits beside them.
  folds      (by name) a change judged on the training files alone: each --panel set's
             training file in 5 folds, on each the --panel_config run (--budget_seconds)
             with and without the --panel_override changes, scored on the fold.
             python launch/benchmark.py --suite=folds --panel=DIR/medical
             --panel_override=train.refit=True --budget_seconds=60
             (--folds_peers: the peers on the same folds, the best one's p@1 beside;
             --folds_choice: the member and λ chosen on the other folds beside the config's;
             --folds_neighbours: the neighbours' votes at each k, power and μ;
             --folds_members: each ensemble member alone on the same folds)
  tables     (by name) the WSABIE step with its tables gathered by rows vs read whole
             by matmuls (wsabie/table_reads.py, model.tables): ms/step on each --panel set
             with --panel_config's B and K, and on a synthetic grid around 'auto''s rule.
             python launch/benchmark.py --suite=tables --panel=corel5k,DIR/enron,…
             --panel_config=configs/wsabie_mulan.py
  profile    (by name) where the WSABIE step's time goes on each --panel set with
             --panel_config's B, Q and K: ms a step, pairs/s, multiply-adds a second
             beside a plain matmul's, and XLA's kernels ranked by time (a trace).
             python launch/benchmark.py --suite=profile --panel=standin:text
  checkpoints  (by name) seconds to save and restore a checkpoint at the web-scale
             config's table sizes and 10× its labels, beside its checksums' share.
  peers      (by name) the extreme-classification libraries a user would pick
             instead (benchmarks/peers.py: napkinXC PLT and BR, omikuji Parabel
             and Bonsai, fastText ova, scikit-learn one-vs-rest; those installed,
             pip install -e '.[peers]'), each on every --panel set's raw and
             tf-idf features, 2 threads: test p@1, p@3, p@5, training seconds
             (--panel_seeds=3: each the mean of seeds 0-2). The panel suite runs
             them too, at its seeds, and reads ours against the best.
             python launch/benchmark.py --suite=peers --panel=corel5k,DIR/enron
  input      (by name) the streamed input alone: pairs/s at which the web-scale
             config's calls of batches are built from its shards
             (--accelerator_webscale_shards, else the config's folder) on
             1, 2, 4 and 8 threads (train.input_threads).
             python launch/benchmark.py --suite=input
  skipgram_epoch  paper 004 Table 1: seconds per epoch of Fast0Tag, Fixed WV and
             the proposed objective, full vs sampled, at 291 labels / 17,665
             images and 925 labels / 102,709 images (the paper's sizes), then at
             10,000 and 30,000 labels; synthetic data, tower d → 1024 → 300,
             B = 256. An epoch's time is steps per epoch × the mean of 20 timed steps.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import json
import pathlib

from absl import flags, logging

from wsabie_jax.benchmarks import accelerator, suites
from wsabie_jax.api import cli
from wsabie_jax.config.args import parse_overrides

_SUITE = flags.DEFINE_list('suite', ['all'], f'{", ".join(suites.NAMES)} (all: every suite '
                           'not marked by name).')
flags.register_validator('suite', lambda names: not suites.unknown(names),
                         message=f'each suite is one of {", ".join(suites.NAMES)}')
_BUDGET = flags.DEFINE_float('budget_seconds', 130.0, 'Training budget per system (lightfm suite).')
_DATA = flags.DEFINE_list('data', ['synthetic', 'corel5k'], 'Data for the lightfm suite.')
_PANEL = flags.DEFINE_list('panel', ['corel5k'], 'Data sets of the panel suites (and of '
                           'the accelerator suite\'s panel table).')
_PANEL_BUDGETS = flags.DEFINE_list('panel_budgets', ['10', '60', '300'], 'Seconds (panel suite).')
_PANEL_CONFIG = flags.DEFINE_string('panel_config', 'configs/wsabie_mulan.py',
                                    'The one config file of the panel suite.')
_PANEL_RUNS = flags.DEFINE_integer('panel_runs', 3, 'Runs of ours a budget whose first run '
                                   'lasts under 60 s, pairs/s their median (panel suite; a '
                                   'longer run is not repeated).')
_PANEL_SEEDS = flags.DEFINE_integer(
    'panel_seeds', 1, 'panel: every system runs with seeds 0 … N − 1 (ours: init, draws and '
    'validation split; LightFM: random_state; the peers: their seed, omikuji N runs), each '
    'cell their mean ± standard error.', lower_bound=1)
_PANEL_OVERRIDE = flags.DEFINE_multi_string(
    'panel_override', [], "SECTION.KEY=VALUE set in ours' config after the file's, before its "
    "'auto' fields are fitted (panel, profile and folds suites), e.g. train.select_metric=p@1.")


@flags.validator('panel_override')
def _overrides_parse(items):
  try:
    parse_overrides(items)
  except ValueError as error:
    raise flags.ValidationError(str(error)) from None
  return True


_PANEL_ROUND = flags.DEFINE_integer('panel_round', 1, 'Which round of panel_search.SEARCH (benchmarks/search_rounds.py).')
_PANEL_SEARCH_PEER = flags.DEFINE_bool(
    'panel_search_peer', False, 'panel_search: LightFM (max_sampled 10 and Y) on the same '
    'validation splits, kept at its best of the same validations, beside the candidates.')
_FOLDS_PEERS = flags.DEFINE_bool(
    'folds_peers', False, 'folds: the peers (benchmarks/peers.py) trained on the same folds, '
    "the best one's pooled p@1 printed beside the config's.")
_FOLDS_CHOICE = flags.DEFINE_bool(
    'folds_choice', False, "folds: every (member, λ) of the config's ensemble scored on each "
    "fold, and each fold's chosen by its MAP on the other folds, beside the config's own choice.")
_FOLDS_NEIGHBOURS = flags.DEFINE_bool(
    'folds_neighbours', False, "folds: the neighbours' votes (wsabie/neighbours.py) at each k, "
    "power and weight of folds.NEIGHBOUR_GRID scored on each fold beside the run's model without "
    "its own.")
_FOLDS_MEMBERS = flags.DEFINE_bool(
    'folds_members', False, "folds: each member the config's run trains and the ridge member, "
    "alone, trained on each fold's training part with the run's features, scored on the fold.")
_ACCELERATOR_TABLES = flags.DEFINE_multi_enum(
    'accelerator_tables', list(accelerator.TABLES), accelerator.TABLES,
    'accelerator: which of its tables to take.')
_ACCELERATOR_LABELS = flags.DEFINE_list(
    'accelerator_labels', [], 'accelerator: the grid\'s Ys (default 10000,100000,1000000).')
flags.register_validator('accelerator_labels',
                         lambda ys: all(y.isdigit() and int(y) > 1 for y in ys),
                         message='each Y is an integer above 1')
_ACCELERATOR_WEBSCALE = flags.DEFINE_string(
    'accelerator_webscale_shards', '', 'accelerator: the web-scale config\'s shards (written by '
    'launch/make_shards.py --config=configs/wsabie_webscale.py), for its epoch in the shipped '
    'table; empty: left out.')
_OUT = flags.DEFINE_string('out', 'benchmark.json', 'Where to write the figures.')
_SMALL = flags.DEFINE_bool('small', False, 'Tiny sizes (for tests).')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  result = suites.run(_SUITE.value, _SMALL.value, _BUDGET.value, _DATA.value, _PANEL.value,
                          [float(b) for b in _PANEL_BUDGETS.value], _PANEL_CONFIG.value,
                          _PANEL_ROUND.value, _PANEL_RUNS.value,
                          parse_overrides(_PANEL_OVERRIDE.value), _PANEL_SEARCH_PEER.value,
                          _PANEL_SEEDS.value, _ACCELERATOR_TABLES.value,
                          [int(y) for y in _ACCELERATOR_LABELS.value] or None,
                          _ACCELERATOR_WEBSCALE.value, folds_peers=_FOLDS_PEERS.value,
                          folds_choice=_FOLDS_CHOICE.value,
                          folds_neighbours=_FOLDS_NEIGHBOURS.value,
                          folds_members=_FOLDS_MEMBERS.value)
  pathlib.Path(_OUT.value).write_text(json.dumps(result, indent=2))


if __name__ == '__main__':
  cli.main(main)

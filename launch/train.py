"""Trains a model, evaluates the best checkpoint on the test split, writes metrics.json.

  python launch/train.py --config=configs/wsabie_synthetic.py --workdir=/tmp/run \
      [--config.train.num_epochs=5 ...]

Run again with the same --workdir to resume from the latest checkpoint (with
the same config: budgets, schedules and devices may change); --force_new
moves the previous run aside (WORKDIR.old-TIME) and starts afresh. The
batch is split over the devices (config.train.num_devices). Several hosts:
one process a host, joined by --coordinator_address=HOST:PORT --num_processes=N
--process_id=I, or by what SLURM, Open MPI or a TPU pod slice sets
(docs/MULTIHOST.md; launch/local_cluster.py tries it on one machine).

  python launch/train.py --config=configs/wsabie_mulan.py --print_config

prints every field of the config with its value and where it came from
(default, config file, flag, fitted to the data) and trains nothing.
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import logging as py_logging
import pathlib
import sys

from absl import app, flags, logging

import jax

from wsabie_jax import methods
from wsabie_jax.api import cli, config_view, run
from wsabie_jax.training import hosts, settings

_CONFIG = cli.define_config('Experiment config file.')
_WORKDIR = flags.DEFINE_string('workdir', None, 'Checkpoints, summaries and metrics.json go here.')
flags.mark_flags_as_required(['config'])
_COORDINATOR = flags.DEFINE_string('coordinator_address', None,
                                   'Several hosts: host:port of process 0 (jax.distributed); '
                                   'without it, see --distributed.')
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'Several hosts: how many processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'Several hosts: this process (0 ... N-1).')
_DISTRIBUTED = flags.DEFINE_enum('distributed', 'auto', list(hosts.MODES), 'Several hosts: auto '
                                  '(join when --coordinator_address is given or SLURM / Open MPI '
                                  'started several processes), on (always: JAX finds the others, '
                                  'as on a Cloud TPU pod slice), off (one process).')
_INIT_TIMEOUT = flags.DEFINE_integer('initialization_timeout', 300, 'Several hosts: seconds to '
                                     'wait for every process to join.')
_HEARTBEAT_TIMEOUT = flags.DEFINE_integer('heartbeat_timeout', 30, 'Several hosts: a process '
                                          'not heard from for this many seconds is taken for '
                                          'dead, and the others stop.')
_ALLOW_DATA_CHANGE = flags.DEFINE_bool('allow_data_change', False, 'Resume a run although its '
                                       'data files changed since it was trained (each change '
                                       'is logged).')
_PRINT_CONFIG = flags.DEFINE_bool('print_config', False, 'Print every field of the config, its '
                                   'value and where it came from (default, config file, flag, '
                                   'fitted to the data), and train nothing.')
_FORCE_NEW = flags.DEFINE_bool('force_new', False, 'Move a previous run in --workdir aside '
                               '(WORKDIR.old-TIME) and start afresh instead of resuming it.')


def print_config(argv: list[str]) -> None:
  with cli.one_line_errors():
    config = methods.check(_CONFIG.value)
    config, fitted = methods.of(config).fit(config)
    platform = jax.devices(config.train.platform or None)[0].platform
    config, to_platform = settings.fitted_to_platform(config, platform)
  flagged = [a[len('--config.'):].split('=', 1)[0] for a in argv if a.startswith('--config.')]
  print(config_view.text(config, {**fitted, **to_platform}, flagged))


def main(argv):
  if _PRINT_CONFIG.value:
    return print_config(sys.argv)
  if _WORKDIR.value is None:
    raise app.UsageError('--workdir is required (or --print_config)')
  del argv
  cli.use_compilation_cache()
  # Our progress at INFO; the libraries' (Orbax is chatty) at WARNING.
  logging.set_verbosity(logging.WARNING)
  py_logging.getLogger('wsabie_jax').setLevel(py_logging.INFO)
  hosts.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value,
                   mode=_DISTRIBUTED.value, initialization_timeout=_INIT_TIMEOUT.value,
                   heartbeat_timeout=_HEARTBEAT_TIMEOUT.value)
  workdir = pathlib.Path(_WORKDIR.value)
  if jax.process_index() == 0 and (workdir.is_dir() or not workdir.exists()):  # (else one error)
    cli.say(f'training {_CONFIG.value.get("method", "a model")} in {workdir} (reading the '
            'data; a first run on this machine compiles)')
  # (one_line_errors inside: Peers tells the other processes the one line)
  with hosts.Peers(_HEARTBEAT_TIMEOUT.value), cli.one_line_errors():
    metrics = run.train_and_evaluate(_CONFIG.value, _WORKDIR.value, _FORCE_NEW.value,
                                     _ALLOW_DATA_CHANGE.value)
  if jax.process_index() == 0:
    print(run.summary_line(metrics))
    print(f'(every metric: {_WORKDIR.value}/metrics.json)')


if __name__ == '__main__':
  cli.main(main)

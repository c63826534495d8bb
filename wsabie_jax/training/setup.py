"""Before a run's first step: the processes agree on the run, the workdir is
claimed, the config fitted to the devices, and the workdir marked as the run's
(training/loop.py's `train_and_evaluate` calls these in that order)."""
from __future__ import annotations

import logging
import pathlib

import jax
import ml_collections

from wsabie_jax.training import hosts, identity, parallel, settings, workdir as workdir_lib
from wsabie_jax.training.method import Method

log = logging.getLogger('wsabie_jax')


def mark_the_run(workdir: pathlib.Path, config, method: Method) -> None:
  """The workdir marked ours and its config.json written, once the data is
  known to fit a resumed run's tables (workdir.check_sizes)."""
  workdir_lib.check_sizes(workdir, method.vocabulary)
  workdir_lib.mark(workdir)
  workdir_lib.write_file(workdir / 'config.json', config.to_json_best_effort(indent=2))


def agree(config, workdir: pathlib.Path, run_identity: dict) -> None:
  """Every process started with the same run (config, workdir, device count,
  data), or all leave with one line naming what differs."""
  try:
    hosts.check_same_run({'workdir': str(workdir), 'devices': jax.local_device_count(),
                          **identity.config_fields(config),  # (files hashed once, by of_run)
                          **{k: f.get('sha256') for k, f in run_identity['data'].items()}},
                         timeout=hosts.AGREE_SECONDS)
  except hosts.Disagree as error:
    hosts.exit_together(str(error))


def claim(workdir: pathlib.Path, force_new: bool) -> bool:
  """The workdir made ready for this run (a previous one set aside with
  `force_new`; refused if it is not a run folder of ours): whether it was created."""
  if force_new:
    workdir_lib.set_aside(workdir)
  workdir_lib.check_for_training(workdir)
  created = not workdir.exists()
  workdir.mkdir(parents=True, exist_ok=True)
  return created


def fitted(method: Method, mesh) -> ml_collections.ConfigDict:
  """The method's config with its 'auto' fields fitted to the data (by `build`)
  and the calls' sizes to the devices, checked to fit them."""
  config, values = settings.fitted_to_platform(method.config, parallel.platform(mesh))
  if values:
    log.info('fitted to the %s: %s', parallel.platform(mesh),
             ', '.join(f'{k}={v}' for k, v in values.items()))
  settings.check_fitted(config, config.method)
  parallel.check_fits(jax.eval_shape(method.init_state), parallel.local_devices(mesh)[0],
                      method.description)
  parallel.check_batch(config.train.batch_size, method.stream.num_examples)
  return config

"""Every program a run compiles lowers for TPU and GPU as well as the CPU.

A short run of each kind of config (the methods, the fitted Mulan config,
the adaptive sampler, streamed shards) on this CPU, with the packs planned on
the device as an accelerator's run plans them, records every program JAX
lowers (jit's and the loop's ahead-of-time calls alike, validation and test
included); each is then exported for 'cuda' and 'tpu' (`jax.export`, which
needs no such device). A platform-only op (a CPU custom call outside
`lax.platform_dependent`, a primitive with no TPU rule) fails here, not on a
user's Colab TPU. Nor may a program hold a table as a constant (a scorer
jitted around its model's tables: a new program each validation).
"""
from __future__ import annotations

import contextlib
import json
import pathlib
import re
import subprocess
import sys

import jax
import pytest
from jax._src.interpreters import pxla  # (the one function every lowering passes through)

from tests import helpers
from wsabie_jax.api import configs, run
from wsabie_jax.data import shards, synthetic

ACCELERATORS = ('cuda', 'tpu')


@contextlib.contextmanager
def lowered_programs(into: list):
  """Appends (name, closed jaxpr) of every program lowered meanwhile for this process's
  own platform; the hook is gone before anything is exported."""
  original = pxla.lower_sharding_computation

  def recorded(closed_jaxpr, api_name, fun_name, *args, **kwargs):
    if kwargs.get('lowering_platforms') is None:
      into.append((fun_name, closed_jaxpr))
    return original(closed_jaxpr, api_name, fun_name, *args, **kwargs)

  pxla.lower_sharding_computation = recorded
  try:
    yield into
  finally:
    pxla.lower_sharding_computation = original


def export_for(closed_jaxpr, *platforms: str) -> str:
  """The program's StableHLO text, lowered for `platforms` (several: one
  module holding each one's lowering, in about half the time of one export
  each). Its constants become arguments too (by shape: a donated buffer it
  closed over is gone)."""
  consts = [jax.ShapeDtypeStruct(jax.numpy.shape(c), jax.numpy.result_type(c))
            for c in closed_jaxpr.consts]
  avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed_jaxpr.in_avals]
  fun = jax.jit(lambda consts, *args: jax.core.eval_jaxpr(closed_jaxpr.jaxpr, consts, *args))
  return jax.export.export(fun, platforms=platforms)(consts, *avals).mlir_module()


def _short(config, tmp_path):
  config.train.update(max_steps=6, steps_per_call=3, eval_every_steps=3, eval_subset=50,
                      checkpoint_every_steps=1000, plan_packs='device', call_length='static')
  with config.train.ignore_type():
    config.train.num_epochs = 1
  return config


def _shards_config(tmp_path):
  c = configs.load('wsabie_webscale:small')
  c.data.shards_dir = str(tmp_path / 'shards')
  c.data.update(num_train=1200, num_valid=100, num_test=100, shard_size=400)
  c.data.synthetic.update(num_labels=100, num_features=500)
  c.train.batch_size, c.model.dim = 64, 16
  spec = synthetic.SyntheticSpec(**c.data.synthetic)
  for split, n in (('train', 1200), ('valid', 100), ('test', 100)):
    shards.write_synthetic(spec, tmp_path / 'shards' / split, n, c.data.shard_size, split)
  return c


CASES = {
    'wsabie, per-row draws': lambda tmp: configs.load('wsabie_synthetic:small'),
    'wsabie, fitted (exact rank)': lambda tmp: _quick_members(configs.load('wsabie_mulan:small')),
    'wsabie, shared draws, gathered ahead': lambda tmp: _ahead(_with(
        configs.load('wsabie_synthetic:small'), draws='per_batch')),
    'adaptive sampler': lambda tmp: configs.load('samplers:vse_warp,synthetic,small'),
    'skip-gram': lambda tmp: configs.load('skipgram_synthetic:proposed,small'),
    'objects and parts': lambda tmp: configs.load('parts_synthetic:shared,iw,small'),
    'streamed shards': _shards_config,
}


def _with(config, **loss):
  config.loss.update(loss)
  return config


def _quick_members(config):
  """The linear members' programs at fewer iterations (the same programs: PA-I's
  epochs and L-BFGS's iterations are runs of them, and a strong l2 converges in few)."""
  config.model.update(helpers.QUICK_MEMBERS)
  return config


def _ahead(config):
  config.train.gather_ahead = True
  return config


# A program's lowering rules are chosen by its ops, not by its sizes: programs
# whose text differs only in shapes (the same eager op at many sizes, a step at
# another batch) are exported once.
SIZES = re.compile(r'\[[\d,]*\]|shape=\([\d, ]*\)')


def lowered_programs_of(case: str, tmp_path) -> list:
  """(name, closed jaxpr) of every program a short run of `case` lowers, in
  this process, its caches cleared first (so nothing is skipped as seen)."""
  config = _short(CASES[case](tmp_path), tmp_path)
  if 'oov' in config:
    config.oov.steps = 0
  jax.clear_caches()
  programs = []
  with lowered_programs(programs):
    run.train_and_evaluate(config, tmp_path / 'run')
  return programs


def export_failures(programs: dict) -> list[str]:
  """'case: name on platform: error' for each (case, name, closed jaxpr) that
  fails to export for an accelerator (exported for all at once; one that
  fails, for each on its own, to name the platform)."""
  failed = []
  for case, name, closed_jaxpr in programs.values():
    try:
      export_for(closed_jaxpr, *ACCELERATORS)
      continue
    except Exception:  # noqa: BLE001 (which platform, and why: below)
      pass
    for platform in ACCELERATORS:
      try:
        export_for(closed_jaxpr, platform)
      except Exception as error:  # noqa: BLE001 (whatever a lowering raises is the finding)
        failed.append(f'{case}: {name} on {platform}: {type(error).__name__}: '
                      f'{str(error)[:300]}')
  return failed


def all_cases(tmp_path) -> dict:
  """{'names': case → the programs' names, 'skipped': case → why, 'failed': […]}."""
  from wsabie_jax.data import wordnet
  names, skipped, distinct = {}, {}, {}
  for i, case in enumerate(CASES):
    try:
      programs = lowered_programs_of(case, tmp_path / str(i))
    except wordnet.WordNetMissing as missing:
      skipped[case] = str(missing)
      continue
    names[case] = [name for name, _ in programs]
    for name, closed_jaxpr in programs:
      distinct.setdefault(SIZES.sub('[]', str(closed_jaxpr.jaxpr)), (case, name, closed_jaxpr))
  return {'names': names, 'skipped': skipped, 'failed': export_failures(distinct),
          'constants': large_constants(distinct)}


# Elements a program may hold as a constant: a table closed over by a jitted
# function is baked into its program (a new program per model: each
# validation compiled anew; docs/DESIGN.md §1), where it should be an argument.
MAX_CONSTANT = 1024


def large_constants(programs: dict) -> list[str]:
  """'case: name holds a constant of shape S' for each program with one over MAX_CONSTANT."""
  return [f'{case}: {name} holds a constant of shape {jax.numpy.shape(c)}'
          for case, name, closed_jaxpr in programs.values() for c in closed_jaxpr.consts
          if jax.numpy.size(c) > MAX_CONSTANT]


def test_every_program_a_run_compiles_lowers_for_gpu_and_tpu(tmp_path):
  """The cases run in a process of their own, one whose JAX has lowered
  nothing yet (and whose caches are cleared between cases), so every program
  of each run is lowered and recorded there; this test process's caches stay
  warm for the tests after it."""
  out = subprocess.run([sys.executable, '-m', 'tests.lowering_test', str(tmp_path)],
                       capture_output=True, text=True, timeout=600,
                       cwd=pathlib.Path(__file__).parents[1])
  assert out.returncode == 0, out.stderr[-3000:]
  found = json.loads(out.stdout.strip().splitlines()[-1])
  for case in CASES:
    if case in found['skipped']:
      assert case == 'objects and parts', found['skipped']  # WordNet alone may be absent
      continue
    assert 'many' in found['names'][case], (case, found['names'][case])  # the loop's call
  assert not found['failed'], '\n'.join(found['failed'])
  assert not found['constants'], '\n'.join(found['constants'])


def test_a_cpu_only_op_is_caught():
  """The check itself: a program holding the CPU's row kernel outside
  `platform_dependent` fails to export, named once for each accelerator."""
  from wsabie_jax.core import native_rows
  if not native_rows.available():
    pytest.skip('the native kernel is not built here')
  import numpy as np
  from tests.row_scatter_test import _operands
  operands = [jax.numpy.asarray(x) for x in _operands(np.random.default_rng(0), D=8)]
  programs = []
  with lowered_programs(programs):
    jax.jit(native_rows.add_scaled_rows).lower(*operands)
  assert programs
  failed = export_failures({'': ('kernel', *programs[-1])})
  assert [f.split(':')[1] for f in failed] == [f' {programs[-1][0]} on {p}' for p in ACCELERATORS]


if __name__ == '__main__':  # python -m tests.lowering_test TMPDIR: every case, JSON out
  import tests.conftest  # noqa: F401 (the test processes' JAX settings and caches)
  print(json.dumps(all_cases(pathlib.Path(sys.argv[1]))))

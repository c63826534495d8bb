"""What a run compiles: its state at step 0 is one program, and a validation
compiles nothing that the first one did not.

The init run as the ops it is made of would compile each op on its own:
34 programs for a one-step WSABIE run where one program makes 13. And the
launch scripts keep every program on disk, however quick to compile, so a
run started again compiles none.

A function jitted around a closure bakes the closure's arrays into its
program as constants, so a scorer built that way around a model's tables
is a new program at every validation: skip-gram's tower compiled again at
each of its validations, and the linear member's scores at each weighing
(a debtags member alone is 5M floats of constants). The scorers take their
tables as arguments instead (methods/skipgram.py `_embed`,
baselines/linear.py `linear_scores`, wsabie/linear_member.py `_weighed`).

Counted as programs lowered (helpers.compilations_counted), which no
compile cache hides; tests/lowering_test.py checks that no program of any
kind of run holds a table as a constant.
"""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests import helpers
import jax

from wsabie_jax.api import configs, run
from wsabie_jax.baselines import ensemble
from wsabie_jax.core import evaluation, model
from wsabie_jax.data import batching, synthetic
from wsabie_jax.methods import parts as parts_method
from wsabie_jax.methods import skipgram as skipgram_method
from wsabie_jax.parts import step as parts_step
from wsabie_jax.skipgram import step as skipgram_step
from wsabie_jax.wsabie import linear_member
from wsabie_jax.wsabie import step as wsabie_step

STEPS = 40
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _programs_to_initialise(init) -> int:
  with helpers.compilations_counted([]) as lowered:
    jax.block_until_ready(init())
  return len(lowered)


def _inits():
  """(one program's init, the same run op by op) of each method, at shapes no
  other test uses (so no cache holds the ops one by one either)."""
  key = jax.random.PRNGKey(0)
  cfg = helpers.step_config(29, optimizer='adagrad', dim=7, max_norm=100.0)
  tables = (key, 41, 29, 7, 0.0, 'adagrad', np.float32(100.0), np.float32(0.1))
  sg = skipgram_method.skipgram_config(configs.load('skipgram_synthetic:proposed,small'), 43, 19)
  words = np.zeros((23, sg.model.widths[-1]), np.float32)
  pc = parts_method.parts_config(configs.load('parts_synthetic:shared,iw,small'), 31)
  return {'wsabie': (lambda: wsabie_step.init_state(key, 41, cfg),
                     lambda: wsabie_step._init_tables.__wrapped__(*tables)),
          'skip-gram': (lambda: skipgram_step.init_state(key, sg, words),
                        lambda: skipgram_step._init_rest.__wrapped__(key, sg, 1, 23)),
          'parts': (lambda: parts_step.init_state(key, pc, 37),
                    lambda: parts_step.init_state.__wrapped__(key, pc, 37))}


@pytest.mark.usefixtures('users_codegen')  # (a bit-for-bit claim about users' runs)
def test_a_state_at_step_0_is_one_program_and_the_op_by_op_init_bit_for_bit():
  """The one program rounds as the ops run one by one did (core/model.py
  init_params keeps draws, scaling and projection apart) where the bound
  does not bind at step 0."""
  for method, (one_program, op_by_op) in _inits().items():
    assert _programs_to_initialise(one_program) == 1, method
    got, want = one_program(), op_by_op()
    if method == 'skip-gram':
      got = got._replace(words_VxD=None)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=method)


def _lowered(spec: str, every: int, workdir) -> int:
  """Programs a run lowers, validating every `every` steps."""
  c = configs.load(spec)
  c.train.update(max_steps=STEPS, eval_every_steps=every, patience=1000,
                 checkpoint_every_steps=1000)
  if 'oov' in c:
    c.oov.steps = 0
  with helpers.compilations_counted([]) as lowered:
    run.train_and_evaluate(c, workdir)
  return len(lowered)


@pytest.mark.slow  # three whole trainings (the parts method's programs: tests/lowering_test.py)
@pytest.mark.parametrize('spec', ['wsabie_synthetic:small', 'skipgram_synthetic:proposed,small'])
def test_more_validations_compile_nothing_more(tmp_path, spec):
  """After a first run has lowered what any run of the config needs once, a
  run lowers the same programs (those it builds afresh) however often it
  validates. (The caches are kept: the worker's later tests reuse them.)"""
  _lowered(spec, STEPS // 2, tmp_path / 'first')
  twice = _lowered(spec, STEPS // 2, tmp_path / 'twice')
  eight_times = _lowered(spec, STEPS // 8, tmp_path / 'eight')
  assert eight_times == twice


def test_weighing_another_member_compiles_nothing(tmp_path):
  """linear_member.choose on a second state and member of the same shapes
  (as the panel weighs them at every reading of its reach) lowers nothing."""
  spec = synthetic.SyntheticSpec(num_labels=30, num_features=120, nnz=6)
  valid = batching.pad_images(synthetic.generate(spec, 64, split='valid'))
  rng = np.random.default_rng(0)

  def choose():
    params = model.Params(rng.standard_normal((120, 8)).astype(np.float32),
                          rng.standard_normal((30, 8)).astype(np.float32))
    scorer = (lambda i, v: evaluation.embed(params.V_dxD, i, v)), params.W_YxD
    members = {'one_vs_rest': rng.standard_normal((120, 30)).astype(np.float32)}
    return linear_member.choose(scorer, members, valid, 'map', {'ks': (1, 5)})

  choose()
  with helpers.compilations_counted([]) as lowered:
    kind, weight, got = choose()
  assert lowered == [] and len(got) == len(linear_member.WEIGHTS)
  # and the weighed scores are z(WSABIE's) + λ·z(the member's) (wsabie/linear_member.py)
  params = model.Params(rng.standard_normal((120, 8)).astype(np.float32),
                        rng.standard_normal((30, 8)).astype(np.float32))
  U = rng.standard_normal((120, 30)).astype(np.float32)
  i, v = valid.feat_idx_nxF[:5], valid.feat_val_nxF[:5]
  scorer = (lambda a, b: evaluation.embed(params.V_dxD, a, b)), params.W_YxD
  got = linear_member._weighed(scorer, U)(i, v, np.float32(0.5))
  ours = ensemble.wsabie_scores(params)(i, v)
  theirs = np.einsum('bf,bfy->by', v, U[i])
  z = lambda s: (s - s.mean(1, keepdims=True)) / (s.std(1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(got, z(np.asarray(ours)) + 0.5 * z(theirs), rtol=1e-4, atol=1e-4)


# Prints last the programs a launched run asked the persistent cache for, and
# how many of them it found there (JAX's monitoring events).
_COUNTING = '''
import atexit, runpy, sys
import jax.monitoring
counts = {}
jax.monitoring.register_event_listener(
    lambda event, **_: counts.__setitem__(event, counts.get(event, 0) + 1))
atexit.register(lambda: print('cache', counts.get('/jax/compilation_cache/compile_requests_use_cache', 0),
                              counts.get('/jax/compilation_cache/cache_hits', 0)))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
'''


@pytest.mark.slow
def test_a_run_started_again_compiles_nothing(tmp_path):
  """The launch scripts keep every program in their cache (api/cli.py
  `use_compilation_cache`), the small ones too: a second run of the same
  config and data reads each program back, its first run's ~20 quick
  compiles (evaluation at each split's shape, the members' averaging, the
  finiteness checks) included."""
  env = helpers.one_device_env(WSABIE_JAX_CACHE=str(tmp_path / 'cache'))
  for name in ('JAX_COMPILATION_CACHE_DIR', 'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS'):
    env.pop(name, None)  # (tests/conftest.py's; the launch script sets its own)

  def requests_and_hits(workdir) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, '-c', _COUNTING, 'launch/train.py',
         '--config=configs/wsabie_mulan.py:small', f'--workdir={workdir}',
         '--config.train.max_steps=2', '--config.model.ensemble=one_vs_rest',
         '--config.model.ensemble_epochs=2'], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    _, requests, hits = out.stdout.splitlines()[-1].split()
    return int(requests), int(hits)

  requests, _ = requests_and_hits(tmp_path / 'first')
  assert requests >= 20
  assert requests_and_hits(tmp_path / 'second') == (requests, requests)

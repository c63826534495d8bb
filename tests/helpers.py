"""Test shorthands: a WSABIE StepConfig from flat keyword arguments; a random
ranking problem."""
import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np

from wsabie_jax.wsabie import step as step_lib

_MODEL = {'dim', 'max_norm', 'score', 'matmul_precision', 'init_std', 'tables'}


# The linear members (model.ensemble) at a strong l2 and two PA-I epochs: the
# same programs as at a config's own C, converged in a few L-BFGS iterations
# (a panel search's member candidate on 900 Corel5k images: 18.7 s -> 3.0 s on 2 cores).
QUICK_MEMBERS = {'ensemble_epochs': 2, 'ensemble_logistic_C': 0.01, 'ensemble_svm_C': 0.01,
                 'ensemble_kernel_C': 0.01}


def step_config(num_labels: int, *, loss: str = 'warp', optimizer: str = 'sgd',
                learning_rate: float = 0.05, adagrad_init: float = 0.1, l2: float = 0.0,
                **fields):
  """StepConfig(num_labels, ...) with model fields (dim, max_norm, score), the
  loss kind and the loss fields given flat; plain SGD unless told."""
  model = {k: fields.pop(k) for k in list(fields) if k in _MODEL}
  return step_lib.StepConfig(
      num_labels, model=step_lib.ModelConfig(**model),
      loss=step_lib.LossConfig(kind=loss, **fields),
      optim=step_lib.OptimConfig(kind=optimizer, learning_rate=learning_rate,
                                 adagrad_init=adagrad_init, l2=l2))


def ranking_problem(seed: int, B: int, Y: int, D: int, P: int):
  """(images B×D, W Y×D, positives B×P sorted and padded with Y (1 to P an
  image), their mask B×Y), normal entries."""
  rng = np.random.default_rng(seed)
  image = jnp.asarray(rng.normal(0, 1, (B, D)), jnp.float32)
  W = jnp.asarray(rng.normal(0, 1, (Y, D)), jnp.float32)
  pos = np.full((B, P), Y, np.int32)
  for b in range(B):
    n = rng.integers(1, P + 1)
    pos[b, :n] = np.sort(rng.choice(Y, n, replace=False))
  mask = jnp.zeros((B, Y + 1), bool).at[jnp.arange(B)[:, None], pos].set(True)[:, :-1]
  return image, W, pos, mask


class FakeClock:
  """Stands in for training/recorder.now: time moves only when a test says
  (`advance`), plus `per_read` seconds at each reading, so a time-budgeted run
  takes the same course on any machine, loaded or idle."""

  def __init__(self, per_read: float = 0.0):
    self.seconds, self.per_read = 0.0, per_read

  def __call__(self) -> float:
    self.seconds += self.per_read
    return self.seconds

  def advance(self, seconds: float) -> None:
    self.seconds += seconds

  def install(self, monkeypatch) -> 'FakeClock':
    from wsabie_jax.training import recorder
    monkeypatch.setattr(recorder, 'now', self)
    return self


@contextlib.contextmanager
def users_codegen():
  """XLA's CPU fusion emitters as a user's run has them, not tests/conftest.py's
  faster-compiling ones: a step compiled alone and the same step
  inside the loop's call can round an ulp apart under those, so a test that
  pins them bit-identical (docs/SCALE.md) compiles both as users do. The
  in-process caches are cleared on the way in (a program kept from another
  test was built the other way); what it leaves there runs as correctly."""
  from jax._src import compiler  # (every compile's options pass through it)
  from tests.conftest import OLDER_EMITTERS
  if OLDER_EMITTERS not in os.environ.get('XLA_FLAGS', '').split():
    yield
    return
  original = compiler.get_compile_options

  def users(*args, env_options_overrides=None, **kwargs):
    overrides = {**(env_options_overrides or {}), 'xla_cpu_use_fusion_emitters': True}
    return original(*args, env_options_overrides=overrides, **kwargs)

  jax.clear_caches()
  compiler.get_compile_options = users
  try:
    yield
  finally:
    compiler.get_compile_options = original


def one_device_env(**env) -> dict:
  """A launched process's environment on one CPU device, as a user's laptop:
  tests/conftest.py's XLA flags but its device count, with `env` set."""
  from wsabie_jax.api import local_cluster
  flags = local_cluster.flags_but_device_count(os.environ.get('XLA_FLAGS', ''))
  return {**os.environ, 'XLA_FLAGS': ' '.join(flags), **env}


# A launched process's environment with XLA's optimisations on, as a user's
# run has them (tests/conftest.py turns most off, for the subprocesses too):
# for a run whose time is its steps. cli_test's Ctrl-C case, three runs of
# up to 3,000 steps, took 16 s with them and 45 s without.
OPTIMIZED_ENV = {'JAX_DISABLE_MOST_OPTIMIZATIONS': 'false'}


@contextlib.contextmanager
def optimized(when: bool = True):
  """XLA's optimisations back on (tests/conftest.py turns most off) for a test
  whose time is its steps, not its compiling: a paper table's training runs,
  a profile of the step's kernels as a user's run fuses them (every XLA pass;
  LLVM's at level 1, tests/conftest.py). `when` False: left as they are."""
  was = jax.config.read('jax_disable_most_optimizations')
  jax.config.update('jax_disable_most_optimizations', was and not when)
  try:
    yield
  finally:
    jax.config.update('jax_disable_most_optimizations', was)


def wordnet_or_skip():
  """nltk's reader over Debian's WordNet (wordnet-base), or the test skipped
  with the error that says how to install it."""
  from wsabie_jax.data import wordnet
  with skipped_without_wordnet():
    return wordnet.load()


def skip_without_wordnet() -> None:
  """The test skipped, as wordnet_or_skip skips it, where Debian's WordNet
  files are absent; without reading them: a test whose code reads only what
  the runs keep on disk (wordnet._memo) would pay nltk's 5-9 s load a process
  for nothing."""
  from wsabie_jax.data import wordnet
  with skipped_without_wordnet():
    wordnet.prepare()


@contextlib.contextmanager
def skipped_without_wordnet():
  """The test skipped, with the error that says how to install it, where the
  code it runs needs Debian's WordNet and it is absent."""
  import pytest
  from wsabie_jax.data import wordnet
  try:
    yield
  except wordnet.WordNetMissing as e:
    pytest.skip(str(e))


def violator_counts(scores, positive_score, positive, margin: float) -> np.ndarray:
  """Each pair's exact rank, counted from every label's score (last axis):
  the labels not among its image's positives scoring above its positive's
  score − margin. The arguments broadcast."""
  scores, positive = np.asarray(scores), np.asarray(positive)
  return np.sum(~positive & (scores > np.asarray(positive_score) - margin), -1)


@contextlib.contextmanager
def float32_matmuls():
  """Matmuls traced in full float32. Tests that check two forms of the same
  arithmetic against each other (rows against pairs, chunks against the whole
  matrix, the compacted products against numpy) call inner functions, outside
  the step's own `precision.scope`: on a GPU they would otherwise run in TF32
  (3 digits), each form rounded its own way. CPUs run float32 either way."""
  with jax.default_matmul_precision('float32'):
    yield


# Every program jax lowers (jit's and AOT's alike, whether the persistent cache
# then holds its executable or XLA compiles it) records this event once.
LOWERED = '/jax/core/compile/jaxpr_to_mlir_module_duration'


@contextlib.contextmanager
def compilations_counted(into: list):
  """Appends an entry to `into` for every program jax lowers meanwhile: a
  compile counter that no cache can hide."""
  def listener(event: str, seconds: float, **kwargs):
    if event == LOWERED:
      into.append(seconds)
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield into
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)

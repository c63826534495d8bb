"""Timed training for benchmarks: this project and LightFM's WARP side by side.

Both get the same data, the same D and the same wall-clock budget; both are
scored with the same exact metrics (metrics.py). LightFM is an optional peer
(`pip install wheel setuptools; pip install --no-build-isolation
--no-use-pep517 lightfm==1.17`), never a dependency.
"""
from __future__ import annotations

import time
import types
from typing import Callable

import jax
import numpy as np

from wsabie_jax.core import model
from wsabie_jax.core import samplers
from wsabie_jax.skipgram import step as skipgram_step
from wsabie_jax.wsabie import step as step_lib
from wsabie_jax.data import batching, dataset, load_splits, synthetic
from wsabie_jax.data.dataset import SparseDataset
from wsabie_jax.api import configs
from wsabie_jax.training import dispatch, parallel, recorder, settings


def timed_step(cfg: step_lib.StepConfig, num_features: int, batch: dict,
               steps: int = 50, deterministic: bool = False) -> float:
  """Seconds per training step on a fixed batch, after compilation (one
  dispatch a step, compiled as the training loop compiles it)."""
  step = lambda s, b: step_lib.train_step(cfg, s, b)
  return _seconds_a_step(cfg, num_features, step, (jax.device_put(batch),), steps, deterministic)


def timed_gathered_step(cfg: step_lib.StepConfig, stream: batching.PairStream,
                        num_features: int, steps: int = 50) -> float:
  """Seconds per training step that gathers and packs its own batch on the
  device from the stream's resident arrays and one batch's row ids, as each
  step of the loop's calls does on an accelerator (training/dispatch.py):
  its time less `timed_step`'s is what that gathering costs."""
  ids = stream.ids(1)
  budget = stream.budget(ids[None])
  step = lambda s, table, ids: step_lib.train_step(cfg, s, stream.gather(table, ids, budget))
  return _seconds_a_step(cfg, num_features, step,
                         (jax.device_put(stream.table()), jax.device_put(ids)), steps)


def timed_fresh_steps(cfg: step_lib.StepConfig, stream: batching.PairStream,
                      num_features: int, steps: int = 50, first: int = 0, state=None) -> float:
  """Seconds per training step over the stream's batches `first`, `first` + 1,
  …, each put on the device beforehand (one dispatch a step): the step alone
  on the batches the loop trains on, so the loop's pairs/s over it is like for
  like (a repeated batch's steps get easier as it is learned: `timed_step`).
  From `state` (`trained_state`: where the loop's steps reached) the steps do
  the work a trained model's do, not a new one's."""
  batches = [jax.device_put(stream.batch(first + s)) for s in range(steps + 3)]
  step = lambda s, b: step_lib.train_step(cfg, s, b)
  return _seconds_a_step(cfg, num_features, step, batches, steps, each_step=True, state=state)


def trained_state(cfg: step_lib.StepConfig, stream: batching.PairStream, num_features: int,
                  steps: int, steps_per_call: int = 64):
  """The state after the stream's first `steps` batches, trained as the loop
  trains (training/dispatch.py's calls), untimed."""
  state = step_lib.init_state(jax.random.PRNGKey(0), num_features, cfg)
  calls, step = _calls(cfg, stream, steps_per_call, every=steps, total=steps), 0
  state = calls.place(state)
  while step < steps:
    state, _, done = calls(state, step)
    step += done
  calls.close()
  return state


def _calls(cfg: step_lib.StepConfig, stream, steps_per_call: int, every: int,
           total: int) -> dispatch.Dispatcher:
  """The loop's calls of WSABIE steps over `stream` on one device, cut every
  `every` steps, `total` in all (training/dispatch.py)."""
  method = types.SimpleNamespace(stream=stream, mesh=parallel.make_mesh(1), local_step=None,
                                 pure_step=lambda s, b: step_lib.train_step(cfg, s, b))
  train_cfg = settings.TrainConfig(batch_size=stream.batch_size, steps_per_call=steps_per_call,
                                   eval_every_steps=every, checkpoint_every_steps=total)
  return dispatch.Dispatcher(train_cfg, method, 0, total)


def _seconds_a_step(cfg, num_features: int, step, inputs, steps: int,
                    deterministic: bool = False, each_step: bool = False, state=None) -> float:
  """`inputs`: the step's arguments after the state, the same every step;
  with `each_step`, step i's own (i < steps + 3: three warm-up steps first).
  From `state`, else a new model's."""
  if state is None:
    state = step_lib.init_state(jax.random.PRNGKey(0), num_features, cfg)
  step = jax.jit(step, donate_argnums=0, compiler_options=dispatch.compiler_options(deterministic))
  args = (lambda i: (inputs[i],)) if each_step else (lambda i: inputs)
  for i in range(3):
    state, _ = step(state, *args(i))
  jax.block_until_ready(state)
  t = time.perf_counter()
  for i in range(3, steps + 3):
    state, _ = step(state, *args(i))
  jax.block_until_ready(state)
  return (time.perf_counter() - t) / steps


def train_ours(train: SparseDataset, cfg: step_lib.StepConfig, batch_size: int,
               budget_seconds: float, seed: int = 0, steps_per_call: int = 16,
               on_pause: Callable | None = None,
               pause_every_seconds: float | Callable[[float], float] = 0.0,
               positives_per_row: int = 1):
  """WARP until the budget is spent, fed as the training loop feeds it
  (training/dispatch.py): (params, per-epoch [pairs, seconds]); a batch is
  `batch_size` rows of up to `positives_per_row` pairs (data/batching.PairStream).

  As in the loop, compilation is left out and every call's steps are timed.
  `on_pause(params, pairs, seconds)` runs off the clock
  every `pause_every_seconds` of training (a learning curve against time),
  or, given a function, at its value of the last pause's seconds (0 first);
  training ends there when it returns True.
  """
  stream = batching.PairStream(train, batch_size, seed, positives_per_row=positives_per_row)
  steps_per_epoch = stream.num_examples // batch_size
  pairs_a_step = batch_size * stream.pairs_per_row
  state = step_lib.init_state(jax.random.PRNGKey(seed), train.num_features, cfg)
  # Calls end at epoch ends, so each epoch's pairs and seconds are its own.
  steps = _calls(cfg, stream, steps_per_call, every=max(steps_per_epoch, 1), total=10**9)
  step = 0
  after = (pause_every_seconds if callable(pause_every_seconds)
           else lambda last: last + pause_every_seconds)
  with recorder.objects_frozen():  # as in the loop: no full collection mid-run
    epochs, spent, next_pause = [], 0.0, after(0.0)
    stop = False
    while spent < budget_seconds and not stop:
      t, start = time.perf_counter(), step - step % steps_per_epoch
      while (step < start + steps_per_epoch and spent + time.perf_counter() - t < budget_seconds
             and not stop):
        compiled = steps.compile_seconds
        state, _, done = steps(state, step)
        t += steps.compile_seconds - compiled  # compilation is not the steps' time
        step += done
        if on_pause is not None and spent + time.perf_counter() - t >= next_pause > 0:
          jax.block_until_ready(state)
          paused = time.perf_counter()
          stop = bool(on_pause(state.params, step * pairs_a_step, spent + paused - t))
          t += time.perf_counter() - paused
          next_pause = after(next_pause)
      jax.block_until_ready(state)
      seconds = time.perf_counter() - t
      epochs.append([(step - start) * pairs_a_step, seconds])
      spent += seconds
  steps.close()
  return state.params, epochs


def to_csr(ds: SparseDataset):
  import scipy.sparse as sp
  rows = np.repeat(np.arange(ds.num_images), np.diff(ds.feat_indptr))
  return sp.csr_matrix((ds.feat_val, (rows, ds.feat_idx)), shape=(ds.num_images, ds.num_features))


def lightfm_inputs(train: SparseDataset):
  """(interactions, user features) for LightFM: images are users with feature
  rows, labels are items."""
  import scipy.sparse as sp
  rows = np.repeat(np.arange(train.num_images), np.diff(train.label_indptr))
  interactions = sp.coo_matrix((np.ones(len(rows), np.float32), (rows, train.label_idx)),
                               shape=(train.num_images, train.num_labels))
  return interactions, to_csr(train)


def train_lightfm(train: SparseDataset, dim: int, budget_seconds: float, threads: int = 2,
                  seed: int = 0, **lightfm_kw):
  """LightFM WARP on the same pairs (lightfm_inputs), epochs until the budget."""
  from lightfm import LightFM
  interactions, features = lightfm_inputs(train)
  lfm = LightFM(no_components=dim, loss='warp', random_state=seed, **lightfm_kw)
  epochs, spent = [], 0.0
  while spent < budget_seconds:
    t = time.perf_counter()
    lfm.fit_partial(interactions, user_features=features, epochs=1, num_threads=threads)
    seconds = time.perf_counter() - t
    epochs.append([interactions.nnz, seconds])
    spent += seconds
  return lfm, epochs


def lightfm_as_params(lfm, test: SparseDataset):
  """LightFM's ranking as WSABIE parameters: x' = [user embedding, 1], W' = [item, bias].

  The user bias is the same for every label, so it cannot change a ranking.
  """
  _, user_NxD = lfm.get_user_representations(to_csr(test))
  item_bias_Y, item_YxD = lfm.get_item_representations()
  V = np.concatenate([user_NxD, np.ones((len(user_NxD), 1))], 1).astype(np.float32)
  W = np.concatenate([item_YxD, item_bias_Y[:, None]], 1).astype(np.float32)
  padded = batching.pad_images(test)
  identity = padded._replace(feat_idx_nxF=np.arange(test.num_images, dtype=np.int32)[:, None],
                             feat_val_nxF=np.ones((test.num_images, 1), np.float32))
  return model.Params(V, W), identity


def summarize(epochs: list) -> dict:
  pairs, seconds = np.asarray(epochs, np.float64).T
  full = pairs == pairs.max()  # the last epoch may be cut by the budget
  rates = pairs[full] / seconds[full]
  return {'examples_per_sec': float(pairs.sum() / seconds.sum()), 'epochs': float(pairs.sum() / pairs.max()),
          'seconds': float(seconds.sum()), 'first_epoch_rate': float(rates[0]),
          'last_epoch_rate': float(rates[-1])}



def timed_skipgram_step(cfg, words_VxD, stream, tag_counts_Y, steps: int = 20) -> float:
  """Seconds per paper 004 step over real batches (compiled first, steps 1..steps)."""
  state = skipgram_step.init_state(jax.random.PRNGKey(0), cfg, words_VxD)
  step = skipgram_step.make_train_step(cfg, samplers.tag_distribution(tag_counts_Y, cfg.loss.negative_power))
  batches = [jax.device_put(stream.batch(s)) for s in range(steps + 1)]
  state, _ = step(state, batches[0])
  jax.block_until_ready(state)
  t = time.perf_counter()
  for b in batches[1:]:
    state, _ = step(state, b)
  jax.block_until_ready(state)
  return (time.perf_counter() - t) / steps


def lightfm_data(name: str, small: bool):
  """(train, test, config or None): the side by sides' data, synthetic or Corel5k."""
  if name == 'corel5k':
    c = configs.load('wsabie_corel5k')
    train, valid, test = load_splits(c.data)  # Corel5k: no WordNet vocabulary
    return train, test, c
  spec = synthetic.SyntheticSpec(num_labels=10_000, num_features=10_000, nnz=50, signal=0.5)
  n = (20_000, 2_000) if small else (200_000, 10_000)
  if small:
    spec = synthetic.SyntheticSpec(num_labels=500, num_features=1000, nnz=20)
  world = synthetic.make_world(spec)
  train = dataset.normalize(synthetic.generate(spec, n[0], 'train', world=world), 'l2')
  test = dataset.normalize(synthetic.generate(spec, n[1], 'test', world=world), 'l2')
  return train, test, None

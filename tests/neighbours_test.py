"""model.neighbours (wsabie/neighbours.py): the votes of an image's k nearest
training images in WSABIE's embedding space, weighed on validation, saved
with the run and read back by evaluate."""
import json
import logging

import jax.numpy as jnp
import numpy as np
import pytest

from tests.train_test import _tiny_config
from wsabie_jax.api import run
from wsabie_jax.baselines import ensemble
from wsabie_jax.config import schema
from wsabie_jax.core import evaluation
from wsabie_jax.data import batching, dataset
from wsabie_jax.wsabie import fitting, neighbours


def _data(rng, n, d=30, Y=7):
  rows = [(np.sort(rng.choice(d, size=rng.integers(1, 6), replace=False)),) for _ in range(n)]
  features = [(r[0], rng.uniform(0.1, 1.0, len(r[0])).astype(np.float32)) for r in rows]
  labels = [rng.choice(Y, size=rng.integers(1, 4), replace=False) for _ in range(n)]
  return dataset.from_lists(features, labels, d, [f'l{i}' for i in range(Y)])


def _slow_votes(V, train, images_BxD, k, Y):
  """The module docstring's s_y, image by image in numpy."""
  E = np.stack([V[train.features(j)[0]].T @ train.features(j)[1] for j in range(train.num_images)])
  E /= np.linalg.norm(E, axis=1, keepdims=True)
  out = np.zeros((len(images_BxD), Y))
  for b, x in enumerate(images_BxD):
    sims = E @ (x / np.linalg.norm(x))
    for j in np.argsort(-sims, kind='stable')[:k]:
      for y in train.label_idx[train.label_indptr[j]:train.label_indptr[j + 1]]:
        out[b, y] += max(sims[j], 0.0) ** neighbours.POWER
  return out


def test_the_votes_are_the_k_nearest_training_images_labels(monkeypatch):
  """Against a slow reference, with the index made in chunks (EMBED_ROWS 16
  over 50 images: a short last one) and padded labels dropped."""
  monkeypatch.setattr(neighbours, 'EMBED_ROWS', 16)
  rng = np.random.default_rng(0)
  train, V = _data(rng, 50), rng.normal(size=(30, 5)).astype(np.float32)
  near = neighbours.index(jnp.asarray(V), train)
  assert near.images_nxD.shape == (50, 5) and near.pos_nxP.shape[0] == 50
  np.testing.assert_allclose(np.linalg.norm(near.images_nxD, axis=1), 1.0, rtol=1e-5)
  images = rng.normal(size=(9, 5)).astype(np.float32)
  for k in (1, 7, 50):
    got = neighbours.votes(jnp.asarray(images), jnp.asarray(near.images_nxD),
                           jnp.asarray(near.pos_nxP), k, 7)
    np.testing.assert_allclose(np.asarray(got), _slow_votes(V, train, images, k, 7),
                               rtol=1e-4, atol=1e-5)


def test_the_sum_is_the_standardised_ensemble_and_votes():
  """z(ensemble) + μ·z(votes), an image's neighbours found by WSABIE's own
  embedding; μ 0 is the ensemble's scorer itself."""
  rng = np.random.default_rng(1)
  train, V = _data(rng, 40), rng.normal(size=(30, 5)).astype(np.float32)
  W = rng.normal(size=(7, 5)).astype(np.float32)
  embed = lambda i, v: evaluation.embed(jnp.asarray(V), i, v)
  scorer = embed, jnp.asarray(W)
  near = neighbours.index(jnp.asarray(V), train)
  assert neighbours.combined(scorer, embed, near, 5, 0.0) is scorer
  test = batching.pad_images(_data(rng, 12))
  i, v = test.feat_idx_nxF, test.feat_val_nxF
  fn, labels = neighbours.combined(scorer, embed, near, 5, 0.5)
  images = np.asarray(embed(i, v))
  want = (ensemble.standardised(jnp.asarray(images @ W.T))
          + 0.5 * ensemble.standardised(jnp.asarray(_slow_votes(V, train, images, 5, 7))))
  np.testing.assert_allclose(np.asarray(fn(i, v) @ labels.T), np.asarray(want), rtol=1e-4,
                             atol=1e-4)


def test_the_weight_is_the_validation_splits_best():
  """Votes that are the truth (each validation image its own neighbour) win
  over WSABIE's random table; of equal metrics, the smaller μ."""
  rng = np.random.default_rng(2)
  valid, V = _data(rng, 60), rng.normal(size=(30, 16)).astype(np.float32)
  embed = lambda i, v: evaluation.embed(jnp.asarray(V), i, v)
  scorer = embed, jnp.asarray(rng.normal(size=(7, 16)).astype(np.float32))
  padded = batching.pad_images(valid)
  weight, got = neighbours.choose(scorer, embed, neighbours.index(jnp.asarray(V), valid), 1,
                                  padded, 'map', {'ks': (1,)})
  assert set(got) == set(neighbours.WEIGHTS)
  assert weight > 0 and got[weight]['map'] > got[0.0]['map']
  best = max(m['map'] for m in got.values())
  assert weight == min(w for w, m in got.items() if m['map'] == best)


def test_auto_turns_it_on_for_training_splits_of_a_suited_size():
  assert neighbours.auto(neighbours.MIN_IMAGES, 'dot') == 0
  assert neighbours.auto(neighbours.MIN_IMAGES + 1, 'dot') == neighbours.K
  assert neighbours.auto(neighbours.MAX_IMAGES, 'dot') == neighbours.K
  assert neighbours.auto(neighbours.MAX_IMAGES + 1, 'dot') == 0
  assert neighbours.auto(5000, 'neg_euclidean') == 0


def test_a_saved_term_reads_back_and_a_damaged_one_is_named(tmp_path):
  rng = np.random.default_rng(3)
  near = neighbours.index(jnp.asarray(rng.normal(size=(30, 4)).astype(np.float32)),
                          _data(rng, 20))
  neighbours.save(tmp_path, near, 0.5, 7)
  got = neighbours.load(tmp_path)
  assert got['weight'] == 0.5 and got['k'] == 7
  for a, b in zip(got['neighbours'], near):
    np.testing.assert_array_equal(a, b)
  neighbours.save(tmp_path, near, 0.0, 7)  # (μ 0: the choice kept, not the arrays)
  assert neighbours.load(tmp_path)['weight'] == 0.0
  assert neighbours.load(tmp_path)['neighbours'].images_nxD.size == 0
  path = tmp_path / neighbours.FILE
  path.write_bytes(path.read_bytes()[:-40])
  with pytest.raises(ValueError, match=r'neighbours\.npz.*cannot be read'):
    neighbours.load(tmp_path)


def test_a_run_tests_the_votes_and_evaluate_reads_them_back(tmp_path, monkeypatch, caplog):
  """μ chosen once on validation (here forced to 1) with the best state's
  split as the neighbours; the tested refit reads all 600 training images'
  (the images it trained on); evaluate scores what the run tested."""
  choose, chose = neighbours.choose, []
  monkeypatch.setattr(neighbours, 'choose', lambda *a, **k: chose.append(len(a[2].images_nxD))
                      or (1.0, choose(*a, **k)[1]))
  config = _tiny_config(num_epochs=50, eval_every_steps=5, patience=2, refit=True)
  config.optim.kind, config.optim.learning_rate = 'sgd', 30.0  # (wrecked after a few validations)
  config.model.neighbours = 10
  with caplog.at_level(logging.INFO, 'wsabie_jax'):
    got = run.train_and_evaluate(config, tmp_path)
  assert got['refit_steps'] > 0 and got['neighbours_weight'] == 1.0
  assert chose == [540]  # (the split's 600 less the 60 held out)
  assert json.loads((tmp_path / 'metrics.json').read_text())['neighbours_weight'] == 1.0
  saved = neighbours.load(tmp_path)
  assert saved['k'] == 10 and saved['neighbours'].images_nxD.shape[0] == 600
  restored = run.Restored(tmp_path)
  assert restored.evaluate()['map'] == pytest.approx(got['map'], abs=1e-6)
  assert got['map'] != pytest.approx(got['wsabie_map'], abs=1e-6)  # (the votes moved it)


def test_the_mulan_config_fits_the_term_to_the_training_split():
  """'auto' resolves by the split's size; a zero-shot hold-out gets none."""
  config = _tiny_config()
  config.model = schema.auto(config.model, 'neighbours')
  rng = np.random.default_rng(4)
  assert fitting.fitted(config, _data(rng, 400))['model.neighbours'] == neighbours.K
  assert fitting.fitted(config, _data(rng, 200))['model.neighbours'] == 0


def test_streamed_shards_refuse_the_votes_before_a_step(tmp_path):
  """The index reads the training images whole: a shards run asking for it
  is told so at the start, in its own words."""
  from tests.lowering_test import _shards_config
  config = _shards_config(tmp_path)
  config.model.neighbours = 5
  with pytest.raises(ValueError, match=r"model.neighbours=5 .* shards .* take model.neighbours=0"):
    run.train_and_evaluate(config, tmp_path / 'run')
  assert not list((tmp_path / 'run').glob('checkpoints/*'))

"""Scores that decide a rank, a metric or a margin are traced in full float32
(accelerators default to TF32 / bf16 passes; on CPU both are float32, so the
compiled programs are what can be checked here)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.baselines import knn
from wsabie_jax.core import metrics, precision
from wsabie_jax.data import batching
from wsabie_jax.features import visual_terms
from wsabie_jax.wsabie import step as step_lib


def _dot_precisions(lowered) -> set[str]:
  text = lowered.as_text()
  return {line.split('precision = [')[1].split(',')[0] for line in text.splitlines()
          if 'dot_general' in line and 'precision = [' in line}


def test_ranking_knn_and_kmeans_use_float32_matmuls():
  img, W, pos = jnp.ones((4, 8)), jnp.ones((50, 8)), jnp.zeros((4, 2), jnp.int32)
  assert _dot_precisions(metrics.rank_and_top_k.lower(img, W, pos, k=3, score_kind='dot',
                                                      chunk=16)) == {'HIGHEST'}
  idx, val = jnp.zeros((4, 3), jnp.int32), jnp.ones((4, 3))
  assert _dot_precisions(knn.neighbours.lower(idx, val, idx, val, k=2, num_features=10,
                                              chunk=4)) <= {'HIGHEST'}
  assert _dot_precisions(visual_terms.nearest_codeword.lower(jnp.ones((6, 5)),
                                                             jnp.ones((3, 5)))) == {'HIGHEST'}


@pytest.mark.parametrize('name,want', [('float32', 'HIGHEST'), ('default', 'DEFAULT')])
def test_training_step_precision_follows_its_config(name, want):
  cfg = helpers.step_config(20, dim=4, num_draws=5, matmul_precision=name)
  state = step_lib.init_state(jax.random.PRNGKey(0), 10, cfg)
  batch = batching.PairBatch(
      label_BxQ=np.zeros((2, 1), np.int32), weight_BxQ=np.ones((2, 1), np.float32),
      pos_BxP=np.zeros((2, 1), np.int32), num_pos_B=np.ones(2, np.int32),
      feat_idx_BxF=np.zeros((2, 3), np.int32), feat_val_BxF=np.ones((2, 3), np.float32))
  lowered = jax.jit(lambda s, b: step_lib.train_step(cfg, s, b)).lower(state, batch)
  assert _dot_precisions(lowered) == {want}


def test_unknown_precision_is_an_error():
  with pytest.raises(ValueError, match='matmul_precision'):
    helpers.step_config(20, matmul_precision='fp8')
  with pytest.raises(ValueError, match='fp8'):
    precision.scope('fp8')

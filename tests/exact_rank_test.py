"""The exact-rank loss over label chunks against autodiff of the full B×Y form."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.core import model
from wsabie_jax.wsabie import exact_rank
from wsabie_jax.wsabie import warp

# Two forms of the same arithmetic compared: float32 matmuls on any device.
pytestmark = pytest.mark.usefixtures('float32_matmuls')


@pytest.mark.parametrize('score,chunk,rank_weights', [
    ('dot', 3, 'harmonic'), ('dot', 11, 'harmonic'), ('dot', 4, 'mean_rank'),
    ('neg_euclidean', 5, 'harmonic'), ('neg_sq_euclidean', 7, 'harmonic')])
def test_chunks_equal_the_full_matrix(score, chunk, rank_weights):
  """Loss and gradients (image and every label row, the positive's included)
  equal those of warp.exact_rank_loss on all Y scores at once; a chunk size
  that does not divide Y = 11 pads, and positives never count as violators."""
  B, Y = 6, 11
  image, W, pos, mask = helpers.ranking_problem(0, B, Y, 4, 3)
  label = jnp.asarray(pos[:, 0])
  weight = jnp.asarray([1, 1, 0.5, 1, 0, 1], jnp.float32)

  def full(x, W):
    scores = model.score_all(x, W, score)
    return jnp.sum(weight * warp.exact_rank_loss(scores, label, mask, Y, rank_weights, 0.5))

  want_loss, (want_dx, want_dW) = jax.value_and_grad(full, (0, 1))(image, W)
  loss, dx, dW, rank = exact_rank.row_grads(image, W, label, jnp.asarray(pos), weight,
                                            score=score, rank_weights=rank_weights, margin=0.5,
                                            chunk=chunk)
  assert float(want_loss) > 0
  # the rank: each pair's negatives scoring above its positive's score − margin
  scores = np.asarray(model.score_all(image, W, score))
  pos_score = scores[np.arange(B), np.asarray(label)][:, None]
  np.testing.assert_array_equal(rank, helpers.violator_counts(scores, pos_score, mask, 0.5))
  np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
  np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(dW, want_dW, rtol=1e-4, atol=1e-5)

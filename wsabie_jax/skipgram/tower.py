"""The image tower h(x; {W_i}) of paper 004 eq. (2): features → word-vector space.

The paper's widths are imfeats → 4096 → 8192 → 2048 → 300 (ReLU between
layers, the last layer linear so it can reach any word vector). Our images
are sparse bags of visual words, so the first layer reads only the rows of
its kernel that an image's non-zeros select — the same product as a dense
layer on the dense vector, O(nnz·H) instead of O(d·H).
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class ImageTower(nn.Module):
  num_features: int
  widths: Sequence[int]  # hidden widths, then the word dimension D

  @nn.compact
  def __call__(self, feat_idx_BxF: jax.Array, feat_val_BxF: jax.Array) -> jax.Array:
    first = self.widths[0]
    # Images are unit-norm bags (data.normalize='l2'), so unit-variance rows
    # give first-layer activations of unit variance, as lecun_normal does for
    # dense inputs with unit-variance entries.
    kernel_dxH = self.param('input_kernel', nn.initializers.normal(1.0),
                            (self.num_features, first))
    bias_H = self.param('input_bias', nn.initializers.zeros, (first,))
    h_BxH = jnp.einsum('bf,bfh->bh', feat_val_BxF, kernel_dxH[feat_idx_BxF]) + bias_H
    for width in self.widths[1:]:
      h_BxH = nn.Dense(width)(nn.relu(h_BxH))
    return h_BxH

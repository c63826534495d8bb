"""Bag of visual terms (paper 000 §6.2, the setup of Grangier & Bengio 2008).

Each image is cut into overlapping square blocks at several scales; a block is
described by the concatenation of colour and edge features; the descriptors
are quantised by a k-means codebook learnt here in JAX; an image becomes the
sparse histogram of its blocks' codewords (a row of a SparseDataset).

Resolution invariance: every image is letterboxed onto a white square of
`image_size` pixels first (paper 000: "via sampling the pixels this is
invariant to the resolution"), so all images share one static block grid and
a batch of images is one jitted call.

Block descriptor (dim = levels³ + 4·orientations; 96 by default):
  colour  the block's joint RGB histogram, `colour_levels` levels a channel,
          as fractions of its pixels;
  edges   gradient-magnitude-weighted histograms of the (unsigned) gradient
          orientation in each quadrant of the block, divided by the block's
          total magnitude + `edge_floor` (flat blocks get a near-zero part).
Both parts are square-rooted (Hellinger), so Euclidean k-means compares
histograms sensibly. Block sums come from an integral image over grid cells:
O(H·W·C) per image whatever the number of blocks.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from wsabie_jax.core import precision

_GREY = (0.299, 0.587, 0.114)


@dataclasses.dataclass(frozen=True)
class BlockGrid:
  image_size: int = 128
  block_sizes: tuple[int, ...] = (16, 32, 64)  # stride = half a block: overlapping
  colour_levels: int = 4
  orientations: int = 8
  edge_floor: float = 0.02

  def __post_init__(self):
    for s in self.block_sizes:
      if s % 2 or not 2 <= s <= self.image_size:
        raise ValueError(f'block size {s} must be even and within image_size={self.image_size}')
    if self.image_size % self.cell:
      raise ValueError(f'image_size={self.image_size} must be a multiple of {self.cell} '
                       f'(the gcd of the half block sizes {self.block_sizes})')

  @property
  def cell(self) -> int:
    """Side of the grid cell every block and block quadrant is made of."""
    return math.gcd(*(s // 2 for s in self.block_sizes))

  def corners(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(top_K, left_K, size_K) of every block, scale by scale."""
    tops, lefts, sizes = [], [], []
    for s in self.block_sizes:
      starts = np.arange(0, self.image_size - s + 1, s // 2)
      t, l = np.meshgrid(starts, starts, indexing='ij')
      tops.append(t.ravel())
      lefts.append(l.ravel())
      sizes.append(np.full(t.size, s))
    return tuple(np.concatenate(a).astype(np.int32) for a in (tops, lefts, sizes))

  @property
  def num_blocks(self) -> int:
    return len(self.corners()[0])

  @property
  def num_colours(self) -> int:
    return self.colour_levels ** 3

  @property
  def descriptor_dim(self) -> int:
    return self.num_colours + 4 * self.orientations


def pixel_channels(image_HxWx3: jax.Array, grid: BlockGrid) -> jax.Array:
  """Per-pixel indicator of its colour bin, then its gradient magnitude in its
  orientation bin: H×W×(levels³ + orientations)."""
  L = grid.colour_levels
  q_HxWx3 = jnp.clip(jnp.floor(image_HxWx3 * L), 0, L - 1).astype(jnp.int32)
  colour_HxW = (q_HxWx3[..., 0] * L + q_HxWx3[..., 1]) * L + q_HxWx3[..., 2]
  grey_HxW = image_HxWx3 @ jnp.asarray(_GREY, image_HxWx3.dtype)
  gy_HxW, gx_HxW = jnp.gradient(grey_HxW)
  magnitude_HxW = jnp.hypot(gx_HxW, gy_HxW)
  angle_HxW = jnp.mod(jnp.arctan2(gy_HxW, gx_HxW), jnp.pi)  # unsigned: an edge, not its side
  orient_HxW = jnp.minimum((angle_HxW / jnp.pi * grid.orientations).astype(jnp.int32),
                           grid.orientations - 1)
  return jnp.concatenate([jax.nn.one_hot(colour_HxW, grid.num_colours),
                          jax.nn.one_hot(orient_HxW, grid.orientations) * magnitude_HxW[..., None]],
                         axis=-1)


def _box_sums(integral_HxWxC: jax.Array, top_K, left_K, size_K) -> jax.Array:
  """Sums over the boxes [top, top+size) × [left, left+size): K×C."""
  I = integral_HxWxC
  return (I[top_K + size_K, left_K + size_K] - I[top_K, left_K + size_K]
          - I[top_K + size_K, left_K] + I[top_K, left_K])


def block_descriptors(image_HxWx3: jax.Array, grid: BlockGrid) -> jax.Array:
  """The descriptor of every block of one image: num_blocks × descriptor_dim."""
  channels_HxWxC = pixel_channels(image_HxWx3, grid)
  # Sums over grid cells first (every block is whole cells), then an integral
  # image of the small cell grid: XLA's CPU cumsum is quadratic in the length.
  c, n = grid.cell, grid.image_size // grid.cell
  cells_nxnxC = channels_HxWxC.reshape(n, c, n, c, -1).sum((1, 3))
  integral = jnp.pad(jnp.cumsum(jnp.cumsum(cells_nxnxC, 0), 1), ((1, 0), (1, 0), (0, 0)))
  top_K, left_K, size_K = (jnp.asarray(a // c) for a in grid.corners())
  area_K = jnp.square(size_K * c)
  colour_KxC = _box_sums(integral[..., :grid.num_colours], top_K, left_K, size_K)
  colour_KxC = colour_KxC / area_K[:, None].astype(colour_KxC.dtype)
  edges = integral[..., grid.num_colours:]
  half_K = size_K // 2
  quadrants = [_box_sums(edges, top_K + dy * half_K, left_K + dx * half_K, half_K)
               for dy in (0, 1) for dx in (0, 1)]
  edge_KxE = jnp.concatenate(quadrants, axis=-1)
  edge_KxE = edge_KxE / (jnp.sum(edge_KxE, -1, keepdims=True) + grid.edge_floor * area_K[:, None])
  return jnp.sqrt(jnp.maximum(jnp.concatenate([colour_KxC, edge_KxE], -1), 0.0))


def batch_descriptors(grid: BlockGrid):
  """Jitted: N×S×S×3 images in [0, 1] → N×num_blocks×descriptor_dim."""
  return jax.jit(jax.vmap(lambda image: block_descriptors(image, grid)))


def _sq_distances(points_MxC, codebook_KxC):
  return (jnp.sum(jnp.square(points_MxC), 1)[:, None] - 2.0 * points_MxC @ codebook_KxC.T
          + jnp.sum(jnp.square(codebook_KxC), 1)[None, :])


@jax.jit
@precision.full_float32
def nearest_codeword(points_MxC: jax.Array, codebook_KxC: jax.Array):
  """(index_M, squared distance_M) of each point's nearest codeword."""
  d_MxK = _sq_distances(points_MxC, codebook_KxC)
  return jnp.argmin(d_MxK, 1).astype(jnp.int32), jnp.maximum(jnp.min(d_MxK, 1), 0.0)


def assign(points_MxC: np.ndarray, codebook_KxC, chunk: int = 16384) -> np.ndarray:
  """Nearest codeword of every point, in chunks (one compiled shape)."""
  out = np.empty(len(points_MxC), np.int32)
  for start in range(0, len(points_MxC), chunk):
    piece = points_MxC[start:start + chunk]
    padded = np.zeros((chunk, piece.shape[1]), np.float32)
    padded[:len(piece)] = piece
    out[start:start + len(piece)] = np.asarray(nearest_codeword(padded, codebook_KxC)[0])[:len(piece)]
  return out


@jax.jit
def lloyd_step(points_MxC: jax.Array, codebook_KxC: jax.Array, reseed_KxC: jax.Array):
  """One k-means iteration: assign, then move each codeword to its points'
  mean; a codeword that lost all its points restarts at a data point
  (reseed). Returns (codebook, mean squared distance before the move)."""
  index_M, dist_M = nearest_codeword(points_MxC, codebook_KxC)
  K = codebook_KxC.shape[0]
  sums_KxC = jax.ops.segment_sum(points_MxC, index_M, num_segments=K)
  counts_K = jax.ops.segment_sum(jnp.ones_like(dist_M), index_M, num_segments=K)
  means_KxC = sums_KxC / jnp.maximum(counts_K, 1.0)[:, None]
  return jnp.where((counts_K > 0)[:, None], means_KxC, reseed_KxC), jnp.mean(dist_M)


@functools.partial(jax.jit, static_argnums=1)
@precision.full_float32
def kmeans_plus_plus(points_MxC: jax.Array, num_codewords: int, key: jax.Array) -> jax.Array:
  """k-means++ seeding (Arthur & Vassilvitskii 2007): each new codeword is a
  data point drawn with probability ∝ its squared distance to the nearest
  codeword so far. K sequential O(M·C) passes, one compiled loop."""
  M, C = points_MxC.shape
  keys = jax.random.split(key, num_codewords)
  first = jax.random.randint(keys[0], (), 0, M)
  codebook_KxC = jnp.zeros((num_codewords, C), points_MxC.dtype).at[0].set(points_MxC[first])
  nearest_M = jnp.sum(jnp.square(points_MxC - points_MxC[first]), 1)

  def add(k, carry):
    codebook_KxC, nearest_M = carry
    # All points equal (nearest all 0): any point will do.
    logits_M = jnp.where(jnp.any(nearest_M > 0), jnp.log(nearest_M), 0.0)
    pick = jax.random.categorical(keys[k], logits_M)
    nearest_M = jnp.minimum(nearest_M, jnp.sum(jnp.square(points_MxC - points_MxC[pick]), 1))
    return codebook_KxC.at[k].set(points_MxC[pick]), nearest_M

  return jax.lax.fori_loop(1, num_codewords, add, (codebook_KxC, nearest_M))[0]


def kmeans(points_MxC: np.ndarray, num_codewords: int, key: jax.Array, iterations: int = 20,
           on_iteration=None) -> tuple[np.ndarray, list[float]]:
  """Lloyd's k-means from a k-means++ seeding: (codebook K×C, the mean squared
  distance at each iteration — never increasing, up to reseeds)."""
  if len(points_MxC) < num_codewords:
    raise ValueError(f'{len(points_MxC)} descriptors cannot make {num_codewords} codewords')
  points = jnp.asarray(points_MxC, jnp.float32)
  key_init, key = jax.random.split(key)
  codebook_KxC = kmeans_plus_plus(points, num_codewords, key_init)
  history = []
  for it in range(iterations):
    reseed_KxC = points[jax.random.choice(jax.random.fold_in(key, it), len(points_MxC),
                                          (num_codewords,))]
    codebook_KxC, inertia = lloyd_step(points, codebook_KxC, reseed_KxC)
    history.append(float(inertia))
    if on_iteration is not None:
      on_iteration(it, history[-1])
  return np.asarray(codebook_KxC), history


def histograms(codes_NxK: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
  """Each image's bag of visual terms: (sorted codeword ids, counts) per row."""
  rows = []
  for codes in codes_NxK:
    ids, counts = np.unique(codes, return_counts=True)
    rows.append((ids.astype(np.int64), counts.astype(np.float32)))
  return rows


# Pillow's one-channel modes of more than 8 bits: 16-bit (PNG, TIFF), 32-bit, float.
WIDE_MODES = ('I', 'I;16', 'I;16B', 'I;16L', 'I;16N', 'F')


def to_8_bits(im):
  """A 16-bit, 32-bit or float grey image as 8-bit 'L', scaled rather than
  clipped (Pillow's convert clips at 255: a 16-bit photo came out nearly all
  white, a float one in [0, 1] all black). Integers: full scale 65,535 when
  a value exceeds 255, else 255; floats: 1.0 when none exceeds it, else the
  image's maximum. Other modes are returned as they are."""
  from PIL import Image
  if im.mode not in WIDE_MODES:
    return im
  values = np.asarray(im, np.float64)
  if im.mode == 'F':
    values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
    full = max(1.0, float(values.max(initial=0.0)))
  else:
    full = 65535.0 if values.max(initial=0.0) > 255 else 255.0
  return Image.fromarray(np.clip(np.round(values / full * 255.0), 0, 255).astype(np.uint8), 'L')


def load_image(path, image_size: int) -> np.ndarray:
  """An image file as S×S×3 float32 in [0, 1]: transparency over white, the
  longer side scaled to S, letterboxed on white (aspect kept)."""
  from PIL import Image  # Pillow: only featurising needs it
  with Image.open(path) as im:
    im.draft('RGB', (image_size, image_size))  # JPEG: decode at a reduced size
    im = to_8_bits(im).convert('RGBA')
    scale = image_size / max(im.size)
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    im = im.resize(size, Image.BILINEAR, reducing_gap=2.0)
    canvas = Image.new('RGBA', (image_size, image_size), (255, 255, 255, 255))
    canvas.alpha_composite(im, ((image_size - size[0]) // 2, (image_size - size[1]) // 2))
    return np.asarray(canvas.convert('RGB'), np.float32) / 255.0

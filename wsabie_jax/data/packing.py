"""Packed non-zeros: a batch's image features as (row, feature, value) triples.

Padding every image of a batch to the longest image's non-zeros makes a step
cost B·max_nnz rows, several times the real non-zeros where image lengths
vary (docs/DESIGN.md §1 has real sets' figures). Packed, a batch of b pairs holds its
images' non-zeros back to back in a fixed `budget` of slots:

  feat_idx_SxN, feat_val_SxN  the non-zeros of pack s's images in order, then
                              padding (feature 0, value 0: adds nothing);
  feat_row_SxN                the row within the pack (0..b−1) each belongs to,
                              non-decreasing (a sorted segment sum).

S packs of b = B/S pairs each: one per device under data parallelism, so a
device's slice of a batch is a pack of its own pairs (S = 1 on one device).
The budget N is static (one compiled shape), sized from the pairs' lengths so
a batch almost never exceeds it; one that does runs with the next of the
budget classes N·2^k (a second compiled shape, logged). The image embedding
is then a segment sum over N rows (core/model.embed_packed): the step costs
the real non-zeros, not the longest image's (docs/DESIGN.md §1).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

SAMPLED_BATCHES = 1000  # packs drawn as the epochs draw them: their largest total sets the budget
MARGIN = 1.05           # … times this margin


def base_budget(pair_len: np.ndarray, pack_size: int, seed: int = 0,
                drawn_xB: np.ndarray | None = None, balanced: bool = False) -> int:
  """Slots a pack of `pack_size` rows gets: 5% above the largest total
  non-zeros among SAMPLED_BATCHES packs drawn as the epochs draw them, and
  (unless `balanced`) at least mean + 5σ of a pack's total; a multiple of 8
  and never above what the longest rows need. A pack that needs more takes
  the next class (`budget_class`: one more compilation, left out of the
  steps' time).

  `drawn_xB`: the stream's own first batches (batching.EpochOrder). Where a
  pack is a batch they are balanced (`balanced`): their totals sit within a
  few % of the mean, and the largest of 1,000 is what later epochs reach.
  Without them the packs are drawn here as unbalanced epochs draw them
  (permutations cut in packs, without replacement: with replacement they vary
  more than the epochs' do, and a budget sized on them holds more padding
  than the steps need)."""
  pair_len = pair_len.astype(np.int64)
  n = len(pair_len)
  if drawn_xB is not None:
    sample = pair_len[drawn_xB].reshape(-1, pack_size)
  else:
    rng = np.random.default_rng(seed)
    if pack_size * 100 < n:  # a pack is a sliver of the rows: with or without replacement alike
      sample = rng.choice(pair_len, (SAMPLED_BATCHES, pack_size))
    else:
      order = np.concatenate([rng.permutation(n)
                              for _ in range(-(-SAMPLED_BATCHES * pack_size // n))])
      sample = pair_len[order[:SAMPLED_BATCHES * pack_size]].reshape(SAMPLED_BATCHES, pack_size)
  need = max(MARGIN * sample.sum(1).max(), 1)
  if not balanced:  # σ of a pack's total, drawn without replacement (the finite-population factor)
    std = pair_len.std() * math.sqrt(pack_size * max(n - pack_size, 0) / max(n - 1, 1))
    need = max(need, pack_size * pair_len.mean() + 5 * std)
  cap = int(np.sort(pair_len)[-pack_size:].sum())  # the most a pack can ever hold
  return int(max(8, min(-(-int(math.ceil(need)) // 8) * 8, -(-max(cap, 1) // 8) * 8)))


def budget_class(base: int, needed: int) -> int:
  """The smallest base·2^k ≥ needed (k ≥ 0): few shapes, few compilations."""
  budget = base
  while budget < needed:
    budget *= 2
  return budget


def csr_table(indptr: np.ndarray, feat_idx: np.ndarray, feat_val: np.ndarray) -> dict:
  """The arrays a pack is gathered from: each image's start and length, and the
  non-zeros with one (0, 0.0) appended, so padding slots read a real entry."""
  return {'feat_start': indptr[:-1].astype(np.int32),
          'feat_len': np.diff(indptr).astype(np.int32),
          'feat_idx_flat': np.append(feat_idx, 0).astype(np.int32),
          'feat_val_flat': np.append(feat_val, 0).astype(np.float32)}


def _rows_of_slots(ends_b, slot_N):
  """How many images end at or before each slot: searchsorted(ends_b, slot_N,
  'right') as a scatter of the ends and a prefix sum (O(N)), where
  jnp.searchsorted runs a loop of binary steps over every slot."""
  marks_N = jnp.zeros(slot_N.shape, jnp.int32).at[ends_b].add(1, mode='drop')
  return jax.lax.associative_scan(jnp.add, marks_N)


def _pack_one(table: dict, img_b, budget: int):
  """One pack of the images `img_b` in `budget` slots, on the device: (idx_N, val_N, row_N)."""
  len_b = table['feat_len'][img_b]
  ends_b = jnp.cumsum(len_b)
  slot_N = jnp.arange(budget)
  row_N = jnp.minimum(_rows_of_slots(ends_b, slot_N), len(img_b) - 1)
  real_N = slot_N < ends_b[-1]
  src_N = table['feat_start'][img_b][row_N] + slot_N - (ends_b[row_N] - len_b[row_N])
  src_N = jnp.where(real_N, src_N, len(table['feat_idx_flat']) - 1)  # the appended (0, 0.0)
  return (table['feat_idx_flat'][src_N], table['feat_val_flat'][src_N],
          row_N.astype(jnp.int32))


def pack(table: dict, img_B, pack_size: int, budget: int, xp=jnp) -> dict:
  """The images `img_B` (B = S·pack_size) as S packs of `budget` slots (numpy
  or jax alike, the same integers either way)."""
  if xp is np:  # the host's plan, read out
    return {k: v[0] for k, v in gather_planned(table, plan(table, img_B[None], pack_size,
                                                           budget)).items()}
  img_SxB = img_B.reshape(-1, pack_size)
  idx, val, row = jax.vmap(functools.partial(_pack_one, table, budget=budget))(img_SxB)
  return {'feat_idx_SxN': idx, 'feat_val_SxN': val, 'feat_row_SxN': row}


def plan(table: dict, img_xB: np.ndarray, pack_size: int, budget: int) -> dict:
  """Where each slot of x batches' packs reads, planned on the host (numpy,
  all x at once): `feat_src_SxN`, the slot's place in the flat non-zeros
  (padding reads the appended (0, 0.0)), and `feat_row_SxN`, its row within
  the pack; each x×S×N (S packs of N = `budget` slots a batch).

  `gather_planned` reads the plan out into the arrays `pack` builds. Here it
  is a few vectorised passes over a call's non-zeros; on the device the same
  work is a scan over the slots with its pads and gathers, many small kernels
  a step, so where the host is the device the calls are planned here
  (training/dispatch.py)."""
  x, packs = img_xB.shape[0], img_xB.shape[1] // pack_size
  img_R = img_xB.reshape(-1)  # R = x·S·pack_size images, pack after pack
  len_Pxb = table['feat_len'][img_R].reshape(-1, pack_size)
  pad_P = budget - len_Pxb.sum(1)
  if pad_P.min(initial=0) < 0:
    raise ValueError(f'a pack holds {budget - pad_P.min()} non-zeros, over its budget of '
                     f'{budget} slots')
  # Each pack is its images' non-zeros, then its padding as one more run:
  # every slot is its run's start plus its place in the run, read off one
  # repeat of the runs' starts and one arange over all slots.
  count_Pxc = np.concatenate([len_Pxb, pad_P[:, None]], 1).reshape(-1)
  start_Pxc = np.cumsum(count_Pxc) - count_Pxc  # each run's first slot
  last = len(table['feat_idx_flat']) - 1  # the appended (0, 0.0): padding reads it
  first_Pxc = np.concatenate([table['feat_start'][img_R].reshape(-1, pack_size),
                              np.full((len(pad_P), 1), last)], 1).reshape(-1)
  src = np.repeat((first_Pxc - start_Pxc).astype(np.int32), count_Pxc)
  src += np.arange(src.size, dtype=np.int32)
  np.minimum(src, last, out=src)  # a padding run's slots all read `last`
  # Padding takes the pack's last row (its value 0 adds nothing; rows stay sorted).
  row_c = np.minimum(np.arange(pack_size + 1, dtype=np.int32), pack_size - 1)
  row = np.repeat(np.tile(row_c, len(pad_P)), count_Pxc)
  shape = (x, packs, budget)
  return {'feat_src_SxN': src.reshape(shape), 'feat_row_SxN': row.reshape(shape)}


def gather_planned(table: dict, planned: dict) -> dict:
  """A `plan` (numpy or jax alike, of any leading shape: a step's S×N or a
  call's x×S×N) read out of the flat non-zeros: the arrays `pack` builds."""
  src = planned['feat_src_SxN']
  return {'feat_idx_SxN': table['feat_idx_flat'][src], 'feat_val_SxN': table['feat_val_flat'][src],
          'feat_row_SxN': planned['feat_row_SxN']}


def needed(pair_len: np.ndarray, ids_xB: np.ndarray, pack_size: int) -> int:
  """The most non-zeros any pack of these batches (rows of pair ids) holds."""
  return int(pair_len[ids_xB].reshape(-1, pack_size).sum(1).max())


def from_padded(batch):
  """A batching.PairBatch with padded images (feat_idx_BxF, feat_val_BxF:
  streamed shards, tests, benchmarks) in the packed form, one pack: a
  reshape, nothing copied."""
  if batch.feat_idx_BxF is None:
    return batch
  idx_BxF, val_BxF = batch.feat_idx_BxF, batch.feat_val_BxF
  B, F = idx_BxF.shape
  row = jnp.repeat(jnp.arange(B, dtype=jnp.int32), F, total_repeat_length=B * F)
  return batch._replace(feat_idx_SxN=idx_BxF.reshape(1, -1), feat_val_SxN=val_BxF.reshape(1, -1),
                        feat_row_SxN=row.reshape(1, -1), feat_idx_BxF=None, feat_val_BxF=None)


"""Packed non-zeros (data/packing.py): the same images as padding, at their real cost."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wsabie_jax.core import model
from wsabie_jax.data import batching, packing
from wsabie_jax.data.dataset import SparseDataset


def _uneven(num_images=60, num_features=50, num_labels=7, seed=0) -> SparseDataset:
  """Images of 0 to 40 non-zeros (a heavy tail, one empty), 1–3 labels each."""
  rng = np.random.default_rng(seed)
  f_len = np.minimum(rng.geometric(0.12, num_images), 40)
  f_len[3] = 0
  p_len = rng.integers(1, 4, num_images)
  feat_idx = np.concatenate([rng.choice(num_features, n, replace=False) for n in f_len])
  label_idx = np.concatenate([np.sort(rng.choice(num_labels, n, replace=False)) for n in p_len])
  return SparseDataset(np.concatenate([[0], np.cumsum(f_len)]), feat_idx.astype(np.int32),
                       rng.random(f_len.sum()).astype(np.float32) + 0.5,
                       np.concatenate([[0], np.cumsum(p_len)]), label_idx.astype(np.int32),
                       num_features, [str(i) for i in range(num_labels)])


@pytest.mark.parametrize('packs', [1, 4])
def test_packed_batches_embed_as_padded_ones(packs):
  """Every step's packed batch, host and device alike, gives the padded
  batch's image embeddings (the reference: V[idx_BxF] weighted by val_BxF)."""
  ds = _uneven()
  padded = batching.pad_images(ds)
  stream = batching.PairStream(ds, 16, seed=3, packs=packs)
  V = jax.random.normal(jax.random.PRNGKey(0), (ds.num_features, 6))
  table = jax.device_put(stream.table())
  for step in range(0, 30, 3):  # several epochs
    ids = stream.ids(step)
    img = stream.row_image[ids]
    want = np.einsum('bfd,bf->bd', np.asarray(V)[padded.feat_idx_nxF[img]], padded.feat_val_nxF[img])
    host = stream.batch(step)
    assert host.feat_idx_SxN.shape[0] == packs
    device = jax.jit(functools.partial(stream.gather, budget=stream.budget(ids[None])))(table, ids)
    for k, v in host._asdict().items():
      if v is not None:
        np.testing.assert_array_equal(np.asarray(getattr(device, k)), v, err_msg=k)
        assert getattr(device, k).dtype == v.dtype, k
    got, _ = model.embed_packed(V, host, 16)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # rows never decrease within a pack (a sorted segment sum), padding adds 0
    assert np.all(np.diff(host.feat_row_SxN, axis=1) >= 0)
    real = np.diff(ds.feat_indptr)[img].reshape(packs, -1).sum(1)
    for s in range(packs):
      assert np.all(host.feat_val_SxN[s, real[s]:] == 0)
  # a call's batches planned at once are each batch's plan (packing.plan, x×S×N)
  ids_xB = stream.ids_block(0, 30)
  planned = stream.plan(ids_xB, stream.budget(ids_xB))
  for step in (0, 13, 29):
    one = stream.plan(ids_xB[step:step + 1], stream.budget(ids_xB))
    for k in planned:
      np.testing.assert_array_equal(planned[k][step], one[k][0], err_msg=k)


def test_budget_is_near_the_mean_not_the_longest_and_grows_by_classes():
  """The base budget follows the pairs' total non-zeros (heavy tail: far below
  B × the longest); a batch above it gets the next class, base·2^k."""
  rng = np.random.default_rng(0)
  pair_len = np.minimum(rng.geometric(0.01, 5000), 900)  # mean ≈ 100, longest 900
  base = packing.base_budget(pair_len, 128)
  assert 128 * pair_len.mean() < base < 0.3 * 128 * pair_len.max()
  assert base % 8 == 0
  assert packing.budget_class(base, base) == base
  assert packing.budget_class(base, base + 1) == 2 * base
  assert packing.budget_class(base, 3 * base) == 4 * base
  # uniform lengths: the budget is the only size a pack can have
  assert packing.base_budget(np.full(100, 10), 16) == 160


def test_an_oversized_batch_is_packed_whole():
  """A batch of the longest images takes a larger class and loses no non-zero."""
  ds = _uneven()
  stream = batching.PairStream(ds, 8, seed=0)
  longest = np.argsort(stream.row_len)[-8:].astype(np.int32)
  budget = stream.budget(longest[None])
  assert budget >= stream.row_len[longest].sum()
  b = stream.gather(stream.table(), longest, budget, np)
  assert np.count_nonzero(b.feat_val_SxN) == stream.row_len[longest].sum()


@pytest.mark.parametrize('packs', [1, 4])
def test_a_calls_budget_holds_its_fullest_pack(packs):
  """A call's batches share one budget (dispatch.py: stream.budget of the
  call's ids): it must hold the fullest pack of any of them, counted here
  pack by pack. Sized from the emptiest, the device's gather (which cannot
  raise) silently dropped non-zeros: 130 of 155 kept."""
  ds = _uneven()
  stream = batching.PairStream(ds, 8, seed=0, packs=packs)
  ids_xB = stream.ids_block(0, 6).copy()
  ids_xB[4] = np.argsort(stream.row_len)[-8:]  # one batch of the longest rows
  fullest = max(int(stream.row_len[pack].sum()) for ids in ids_xB
                for pack in ids.reshape(packs, -1))
  budget = stream.budget(ids_xB)
  assert budget >= fullest
  gather = jax.jit(functools.partial(stream.gather, budget=budget))
  table = jax.device_put(stream.table())
  for ids in ids_xB:
    batch = gather(table, jnp.asarray(ids))
    assert np.count_nonzero(np.asarray(batch.feat_val_SxN)) == stream.row_len[ids].sum()


def test_padded_batches_convert_without_copying_values():
  idx = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
  val = np.array([[1., 2., 0.], [3., 0., 0.]], np.float32)
  zeros = np.zeros((2, 1), np.int32)
  b = packing.from_padded(batching.PairBatch(zeros, zeros, zeros, zeros[:, 0], feat_idx_BxF=idx,
                                             feat_val_BxF=val))
  assert b.feat_idx_BxF is None and b.feat_idx_SxN.shape == (1, 6)
  np.testing.assert_array_equal(np.asarray(b.feat_row_SxN), [[0, 0, 0, 1, 1, 1]])
  V = jnp.arange(8.0).reshape(4, 2)
  got, _ = model.embed_packed(V, b, 2)
  np.testing.assert_allclose(np.asarray(got), np.stack([V[1] + 2 * V[2], 3 * V[3]]))


def test_eval_batches_cut_padding_and_cover_every_image_once():
  """Shortest first, each batch as wide as its longest image (a power of two):
  every image once, no non-zero value cut, and the embeddings are the padded ones."""
  ds = _uneven(num_images=70)
  ds.feat_val[5] = 0.0  # an explicit zero inside an image: its later entries still count
  padded = batching.pad_images(ds)
  V = np.random.default_rng(1).normal(size=(ds.num_features, 4))
  want = np.einsum('nfd,nf->nd', V[padded.feat_idx_nxF], padded.feat_val_nxF)
  seen, widths = [], set()
  for b in batching.eval_batches(padded, 16):
    widths.add(b.feat_idx_BxF.shape[1])
    rows = b.rows_B[:b.num_real]
    seen.extend(rows)
    got = np.einsum('bfd,bf->bd', V[b.feat_idx_BxF], b.feat_val_BxF)[:b.num_real]
    np.testing.assert_allclose(got, want[rows], rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(b.pos_BxP[:b.num_real], padded.pos_nxP[rows])
  assert sorted(seen) == list(range(70))
  assert all(w & (w - 1) == 0 or w == padded.feat_idx_nxF.shape[1] for w in widths)
  assert min(widths) < padded.feat_idx_nxF.shape[1] / 4  # the short batches are short
  assert len(list(batching.eval_batches(padded, 16, limit=20))) == 2


def test_annotate_keeps_the_input_order():
  """Batched shortest first, the annotations still come in the input's order,
  each image's top labels its own (scored here one image at a time)."""
  import types
  import ml_collections
  from wsabie_jax.api import annotate
  ds = _uneven(num_images=40)
  rng = np.random.default_rng(2)
  V, W = rng.normal(size=(ds.num_features, 5)), rng.normal(size=(ds.num_labels, 5))
  config = ml_collections.ConfigDict({'model': {'score': 'dot'},
                                      'eval': {'batch_size': 8, 'label_chunk': 64}})
  restored = types.SimpleNamespace(
      config=config, vocab={'num_features': ds.num_features, 'label_names': ds.label_names},
      scorer=lambda: (lambda i, v: jnp.einsum('bfd,bf->bd', jnp.asarray(V)[i], v), jnp.asarray(W)))
  out = list(annotate.annotate(restored, ds, k=3))
  assert [title for title, _, _ in out] == [str(i) for i in range(40)]
  for i, (_, top, _) in enumerate(out):
    lo, hi = ds.feat_indptr[i], ds.feat_indptr[i + 1]
    scores = W @ (ds.feat_val[lo:hi] @ V[ds.feat_idx[lo:hi]])
    assert [name for name, _ in top] == [ds.label_names[j] for j in np.argsort(-scores)[:3]]


@pytest.mark.parametrize('rows, pack', [(300, 128), (5000, 128), (20000, 1024)])
def test_the_epochs_packs_rarely_pass_the_budget(rows, pack):
  """The base budget sits just above the packs the epochs actually draw
  (batching.EpochOrder, without replacement): none of 4,000 steps' packs
  passes it, and it is within 8% of their largest (drawn with replacement
  and 15% over that sample's largest, it was 16% above at 300 rows)."""
  rng = np.random.default_rng(1)
  row_len = np.minimum(rng.geometric(0.07, rows), 60)  # mean ≈ 14, longest 60
  base = packing.base_budget(row_len, pack, seed=0)
  totals = row_len[batching.EpochOrder(rows, pack, seed=3).ids_block(0, 4000)].sum(1)
  assert totals.max() <= base < 1.08 * totals.max(), (totals.max(), base)


def test_balanced_batches_hold_their_windows_items_in_a_smaller_budget():
  """EpochOrder with lengths deals each window's items longest first, snake
  order: a window holds what was drawn, no batch of 2,000 steps passes the
  budget sized on the first 1,000, and on long-tailed rows (log-normal, the
  longest 136× the mean) that budget is ≥ 10% below the unbalanced one."""
  rng = np.random.default_rng(2)
  rows, B = 20_000, 1024
  row_len = np.maximum(rng.lognormal(2.5, 1.5, rows).astype(np.int64), 1)
  order = batching.EpochOrder(rows, B, seed=3, lengths=row_len)
  G = order.window
  ids = order.ids_block(0, 2000)
  for w in (0, 7, 124):
    np.testing.assert_array_equal(np.sort(ids[w * G:(w + 1) * G], None),
                                  np.sort(order.drawn(w * G, G), None))
  balanced = packing.base_budget(row_len, B, drawn_xB=ids[:1000], balanced=True)
  unbalanced = packing.base_budget(row_len, B, seed=0)
  totals = row_len[ids].sum(1)
  assert totals.max() <= balanced <= 0.9 * unbalanced, (totals.max(), balanced, unbalanced)
  assert totals.max() < 1.15 * totals.mean()  # (the unbalanced budget: 42% above)

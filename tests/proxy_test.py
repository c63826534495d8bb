"""Paper 002's proxy data: every relation in every split, part images never the object's."""
import numpy as np
import pytest

from wsabie_jax.data import synthetic
from wsabie_jax.parts import proxy


def _data():
  spec = synthetic.SyntheticSpec(num_labels=40, num_features=200, nnz=10, mean_labels=2.5)
  ds = synthetic.generate(spec, 1500)
  rng = np.random.default_rng(0)
  relations = np.unique(rng.integers(0, 40, (60, 2)), axis=0)
  return ds, relations[relations[:, 0] != relations[:, 1]]


def test_every_kept_relation_is_served_by_every_split():
  ds, relations = _data()
  data = proxy.build(ds, relations, min_images=5, seed=0)
  assert len(data.relations_Rx2) + data.dropped_relations == len(relations)
  assert len(data.relations_Rx2) > 30
  sizes = [data.splits[s].num_images for s in ('train', 'valid', 'test')]
  assert sum(sizes) == ds.num_images and sizes[0] > 5 * sizes[1]
  for split in data.splits.values():
    counts = split.label_frequencies()
    assert (counts[data.relations_Rx2] > 0).all()


def test_quadruplets_pair_an_object_with_another_image_of_its_part():
  ds, relations = _data()
  data = proxy.build(ds, relations, min_images=5)
  split = data.splits['valid']
  stream = proxy.QuadrupletStream(split, data.relations_Rx2, batch_size=500, seed=1)
  io, lo, ip, lp = stream.quadruplets(0)
  assert (io != ip).all()
  for i in range(500):
    assert lo[i] in split.labels(io[i]) and lp[i] in split.labels(ip[i])
  assert {tuple(r) for r in np.stack([lo, lp], 1)} <= {tuple(r) for r in data.relations_Rx2}
  # Part images are uniform over the part's other images: every candidate shows up.
  r = data.relations_Rx2[0]
  cands = set(np.flatnonzero([r[1] in split.labels(i) for i in range(split.num_images)]))
  seen = set()
  for step in range(40):
    io, lo, ip, lp = stream.quadruplets(step)
    seen |= set(ip[(lo == r[0]) & (lp == r[1])])
  assert seen == cands and len(cands) > 1
  batch = stream.batch(3)
  assert batch['obj_idx_BxF'].shape == batch['part_idx_BxF'].shape and len(batch['obj_label_B']) == 500


def _tiny(labels_per_image, num_labels=4):
  from wsabie_jax.data.dataset import SparseDataset
  n = len(labels_per_image)
  ones = lambda k: np.ones(k, np.float32)
  return SparseDataset(
      feat_indptr=np.arange(n + 1, dtype=np.int64), feat_idx=np.zeros(n, np.int32),
      feat_val=ones(n), label_indptr=np.cumsum([0] + [len(x) for x in labels_per_image]).astype(np.int64),
      label_idx=np.concatenate([np.asarray(x, np.int32) for x in labels_per_image]),
      num_features=1, label_names=[f'l{y}' for y in range(num_labels)])


def test_a_lone_part_image_that_carries_the_whole_is_not_a_quadruplet():
  """Whole 0, part 1: images {0: [0, 1], 1: [0]}. Counting whole + part images
  (3 ≥ 2) kept the relation, and drawing image 0 for the whole left no other
  part image: the old stream read past label 1's images and returned image 2,
  labelled [2, 3] (paper 002's bug report: a part image without the part)."""
  ds = _tiny([[0, 1], [0], [2, 3], [2], [3]])
  rel = np.asarray([[0, 1], [2, 3]])
  np.testing.assert_array_equal(proxy.serves_every_whole_image(ds, rel), [False, True])
  # Images 2–4 serve (2, 3): whole image 2 or 3, part image 4 or (for whole 3) 2.
  stream = proxy.QuadrupletStream(ds, rel[1:], batch_size=64, seed=0)
  io, lo, ip, lp = stream.quadruplets(0)
  assert (io != ip).all() and all(3 in ds.labels(i) for i in ip)
  bad = proxy.QuadrupletStream(ds, rel[:1], batch_size=64, seed=0)
  with pytest.raises(ValueError, match='label 1 has no image other than image 0'):
    for step in range(10):
      bad.quadruplets(step)


def test_build_keeps_only_relations_every_whole_image_can_serve():
  """A random overlap-heavy labelling: every kept relation, in every split, has a
  different part image for each of its whole's images (checked by brute force)."""
  rng = np.random.default_rng(5)
  labels = [sorted(set(rng.integers(0, 6, rng.integers(1, 4)))) for _ in range(60)]
  ds = _tiny(labels, num_labels=6)
  rel = np.asarray([(a, b) for a in range(6) for b in range(6) if a != b])
  data = proxy.build(ds, rel, min_images=1, seed=1)
  for split in data.splits.values():
    has = [set(split.labels(i)) for i in range(split.num_images)]
    for whole, part in rel:
      ok = any(whole in h for h in has) and all(
          any(part in has[j] and j != i for j in range(len(has)))
          for i in range(len(has)) if whole in has[i])
      kept = any((r == (whole, part)).all() for r in data.relations_Rx2)
      assert kept <= ok, (whole, part)
      assert proxy.serves_every_whole_image(split, np.asarray([[whole, part]]))[0] == ok

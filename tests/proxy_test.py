"""Paper 002's proxy data: every relation in every split, part images never the object's."""
import numpy as np

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

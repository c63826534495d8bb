"""WordNet 3.0 from Debian's wordnet-base: relations, sibling matrix, the WordNet-mode world."""
import json

import numpy as np
import pytest

from tests import helpers
from wsabie_jax.core import metrics
from wsabie_jax.data import wordnet

# One worker reads WordNet for the whole file (its load is 4-5 s; the first
# pass over the 82k noun synsets another 10): `--dist loadgroup` (pyproject.toml).
pytestmark = pytest.mark.xdist_group('wordnet')


@pytest.fixture(scope='module')
def net():
  return helpers.wordnet_or_skip()


def test_relations_from_the_debian_files(net):
  assert 'car_door.n.01' in {s.name() for s in wordnet.part_meronyms(net.synset('car.n.01'))}
  assert 'canine.n.02' in {s.name() for s in wordnet.hypernyms(net.synset('dog.n.01'))}
  nouns = list(net.all_synsets('n'))
  assert len(nouns) == 82_115
  assert sum(len(wordnet.part_meronyms(s)) for s in nouns) == 9_097


def test_missing_wordnet_says_how_to_install(tmp_path):
  with pytest.raises(wordnet.WordNetMissing, match='apt-get install wordnet-base'):
    wordnet.prepare(tmp_path / 'nowhere', tmp_path / 'root')
  # … and so do the lookups kept on disk (the synthetic world's vocabulary).
  with pytest.raises(wordnet.WordNetMissing, match='apt-get install wordnet-base'):
    wordnet.synthetic_vocabulary(5, tmp_path / 'nowhere')


def test_sibling_matrix_on_a_hand_checked_vocabulary(net):
  names = ['dog.n.01', 'wolf.n.01', 'fox.n.01', 'cat.n.01', 'car.n.01', 'truck.n.01']
  parents, parent_names = wordnet.parents_table(net, names)
  S = metrics.sibling_matrix(parents).toarray()
  # dog, wolf and fox are canines (canine.n.02); car and truck are motor vehicles;
  # cat (feline.n.01) has no sibling here.
  want = np.eye(6, dtype=bool)
  for group in ([0, 1, 2], [4, 5]):
    want[np.ix_(group, group)] = True
  np.testing.assert_array_equal(S, want)
  assert 'canine.n.02' in parent_names and 'motor_vehicle.n.01' in parent_names
  a, b = np.meshgrid(np.arange(6), np.arange(6), indexing='ij')
  np.testing.assert_array_equal(metrics.is_sibling(a.ravel(), b.ravel(), parents).reshape(6, 6), S)


def test_part_of_vocabulary_keeps_visual_part_of_links(net):
  names, relations = wordnet.part_of_vocabulary(net, 200)
  assert len(names) == 200 and 'car.n.01' in names and len(relations) > 100
  for whole, part in relations[:50]:
    assert names[part] in {s.name() for s in wordnet.part_meronyms(net.synset(names[whole]))}
  assert all(net.synset(n).lexname() in wordnet.VISUAL_LEXNAMES for n in names)


def test_synthetic_wordnet_world_uses_real_synsets(net):
  from wsabie_jax.data import synthetic
  spec = synthetic.SyntheticSpec(num_labels=300, num_features=2000, vocabulary='wordnet')
  with pytest.raises(ValueError, match='needs the Y synsets'):  # data/ never reads WordNet itself
    synthetic.make_world(spec)
  world = synthetic.make_world(spec, wordnet.synthetic_vocabulary(300))
  ds = synthetic.generate(spec, 500, world=world)
  assert ds.label_names[:2] == list(world.label_names[:2]) and ds.label_names[0].endswith('.n.01')
  S = metrics.sibling_matrix(ds.label_parents)
  assert S.sum() > 300  # real siblings exist
  assert len(world.relations) > 100


def test_what_is_read_off_wordnet_does_not_depend_on_nltks_order(net, monkeypatch):
  """nltk keeps a synset's pointers in a set, whose order changes with the hash
  seed: the wrappers sort, so the same relations listed in reverse give the
  same parents, parts and vocabulary."""
  from nltk.corpus.reader.wordnet import Synset
  names = ['dog.n.01', 'car.n.01', 'ship.n.01', 'tree.n.01', 'house.n.01']

  def read():
    table, parents = wordnet.parents_table(net, names)
    parts = [[p.name() for p in wordnet.part_meronyms(net.synset(n))] for n in names]
    return table.tolist(), parents, parts, wordnet.part_of_pairs(net, names)

  want = read()
  assert len(want[1]) > len(names) and sum(map(len, want[2])) > 10  # several of each
  related = Synset._related
  monkeypatch.setattr(Synset, '_related', lambda self, symbol: related(self, symbol)[::-1])
  assert read() == want


@pytest.mark.slow
def test_parents_do_not_depend_on_the_hash_seed(net):
  """nltk stores pointers in sets; our wrappers sort, so data built on WordNet
  is reproducible: two processes with different hash seeds agree."""
  import os
  import subprocess
  import sys
  code = ('from wsabie_jax.data import wordnet as w; wn = w.load(); '
          "print(w.parents_table(wn, ['dog.n.01', 'car.n.01', 'ship.n.01', 'tree.n.01'])[1], "
          "[s.name() for s in w.part_meronyms(wn.synset('car.n.01'))][:5])")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  outs = {subprocess.run([sys.executable, '-c', code], cwd=root, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2)}
  assert len(outs) == 1 and 'canine' in outs.pop()


def test_what_is_read_off_wordnet_is_kept_on_disk(net, tmp_path, monkeypatch):
  """pairs_among computes once, then reads its memo (a damaged one is computed again)."""
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  names = ['car.n.01', 'car_door.n.01', 'dog.n.01', 'no_such_thing', 'tree.n.01', 'trunk.n.01']
  want = wordnet.part_of_pairs(net, names)
  assert want and wordnet.pairs_among(names) == want
  (memo,) = (tmp_path / 'wsabie_jax' / 'wordnet-3.0').glob('memo-pairs-*.json')
  monkeypatch.setattr(wordnet, 'part_of_pairs', lambda *a: pytest.fail('recomputed'))
  assert wordnet.pairs_among(names) == want  # read off the memo
  memo.write_text('{"half a')
  monkeypatch.setattr(wordnet, 'part_of_pairs', lambda *a: want[:1])
  assert wordnet.pairs_among(names) == want[:1]  # computed again, and rewritten
  assert json.loads(memo.read_text()) == [list(p) for p in want[:1]]

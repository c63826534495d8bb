"""WordNet 3.0 from Debian's `wordnet-base`, read with nltk: is-a and part-of over nouns.

Paper 000 §4 defines sibling precision through is-a relations; paper 002
builds its proxy data from part-of relations. Debian ships the WordNet 3.0
database in /usr/share/wordnet (`apt-get install wordnet-base`; `.ci/run` and
the README's set-up install it). Two things stand between those files and
nltk's reader: Debian leaves out `lexnames` (the 45 lexicographer file names,
listed below from WordNet's lexnames(5WN)), and recent nltk reads only plain
single-link files under a root on `nltk.data.path`. So the first use copies
the database into a cache directory with `lexnames` written beside it.
Nothing is ever downloaded.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import warnings

from wsabie_jax.data import synthetic

DEBIAN_DIR = '/usr/share/wordnet'
FILES = ('data.noun', 'index.noun', 'noun.exc', 'data.verb', 'index.verb', 'verb.exc',
         'data.adj', 'index.adj', 'adj.exc', 'data.adv', 'index.adv', 'adv.exc')

# lexnames(5WN), WordNet 3.0: file number, name, syntactic category (1 noun … 4 adverb).
LEXNAMES = (
    'adj.all 3', 'adj.pert 3', 'adv.all 4', 'noun.Tops 1', 'noun.act 1', 'noun.animal 1',
    'noun.artifact 1', 'noun.attribute 1', 'noun.body 1', 'noun.cognition 1',
    'noun.communication 1', 'noun.event 1', 'noun.feeling 1', 'noun.food 1', 'noun.group 1',
    'noun.location 1', 'noun.motive 1', 'noun.object 1', 'noun.person 1', 'noun.phenomenon 1',
    'noun.plant 1', 'noun.possession 1', 'noun.process 1', 'noun.quantity 1', 'noun.relation 1',
    'noun.shape 1', 'noun.state 1', 'noun.substance 1', 'noun.time 1', 'verb.body 2',
    'verb.change 2', 'verb.cognition 2', 'verb.communication 2', 'verb.competition 2',
    'verb.consumption 2', 'verb.contact 2', 'verb.creation 2', 'verb.emotion 2', 'verb.motion 2',
    'verb.perception 2', 'verb.possession 2', 'verb.social 2', 'verb.stative 2', 'verb.weather 2',
    'adj.ppl 3')


class WordNetMissing(FileNotFoundError):
  pass


def _cache_root() -> pathlib.Path:
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return pathlib.Path(base) / 'wsabie_jax' / 'wordnet-3.0'


def prepare(source: str | os.PathLike = DEBIAN_DIR, root: str | os.PathLike | None = None) -> pathlib.Path:
  """A directory nltk can read WordNet from: the database files copied, `lexnames` added."""
  source = pathlib.Path(source)
  missing = [f for f in FILES if not (source / f).is_file()]
  if missing:
    raise WordNetMissing(
        f'WordNet 3.0 not found in {source} (missing {", ".join(missing[:3])}…): install '
        "Debian's wordnet-base (sudo apt-get install wordnet-base) or pass its directory")
  root = pathlib.Path(root) if root is not None else _cache_root()
  root.mkdir(parents=True, exist_ok=True)
  # Written under a temporary name, then renamed: processes sharing the cache
  # (pytest -n, several launches) never read a half-copied file.
  for name in FILES:
    target = root / name
    if not target.exists() or target.stat().st_size != (source / name).stat().st_size:
      _atomic_write(target, (source / name).read_bytes())
  lexnames = ''.join(f'{i:02d}\t{entry.split()[0]}\t{entry.split()[1]}\n'
                     for i, entry in enumerate(LEXNAMES)).encode()
  if not (root / 'lexnames').exists() or (root / 'lexnames').read_bytes() != lexnames:
    _atomic_write(root / 'lexnames', lexnames)
  return root


def _atomic_write(target: pathlib.Path, data: bytes) -> None:
  tmp = target.with_name(f'.{target.name}.{os.getpid()}')
  tmp.write_bytes(data)
  os.replace(tmp, target)


def load(source: str | os.PathLike = DEBIAN_DIR):
  """nltk's WordNetCorpusReader over Debian's files (a clear error when they are absent)."""
  return _load(str(pathlib.Path(source)))  # one reader a directory however it is named


@functools.lru_cache(maxsize=2)
def _load(source: str):
  import nltk
  from nltk.corpus.reader.wordnet import WordNetCorpusReader

  class _WordNet30(WordNetCorpusReader):
    def map_wn(self, version='wordnet'):
      return None  # this is WordNet 3.0 itself: nothing to map (nltk would look for its own copy)

  root = prepare(source)
  if str(root) not in nltk.data.path:
    nltk.data.path.insert(0, str(root))  # nltk reads only under its data path
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')  # "multilingual functions are not available"
    return _WordNet30(str(root), None)


# nltk keeps a synset's pointers in a set of (pos, offset) tuples, whose order
# changes with Python's string hashing from one process to the next: sorted by
# name here, so a vocabulary's parents (and all that follows) are reproducible.

def hypernyms(synset) -> list:
  """Direct is-a parents (instance hypernyms included: an instance is-a its class), by name."""
  return sorted(synset.hypernyms() + synset.instance_hypernyms(), key=lambda s: s.name())


def part_meronyms(synset) -> list:
  """The synsets that are part of this one (car.n.01 → car_door.n.01, …), by name."""
  return sorted(synset.part_meronyms(), key=lambda s: s.name())


# Things one can photograph (paper 002 draws its synsets from ImageNet):
# WordNet's part-of links are otherwise dominated by geography.
VISUAL_LEXNAMES = ('noun.artifact', 'noun.body', 'noun.animal', 'noun.plant', 'noun.object',
                   'noun.food')


def part_of_vocabulary(wn, num_labels: int, lexnames=VISUAL_LEXNAMES):
  """The `num_labels` noun synsets with the most part-of links to one another, and those links.

  Paper 002 §4.3.2 keeps synsets that take part in part-of relations and have
  images. Here the synsets of the visual lexicographer files are ranked by
  their number of part-of links (either side), ties by name, and the
  relations are the (whole, part) pairs inside the selection:
  (synset names, relations as [whole index, part index] pairs).
  """
  degree: dict[str, int] = {}
  links = []
  visual = lambda s: s.lexname() in lexnames
  for whole in wn.all_synsets('n'):
    if not visual(whole):
      continue
    for part in filter(visual, part_meronyms(whole)):
      links.append((whole.name(), part.name()))
      degree[whole.name()] = degree.get(whole.name(), 0) + 1
      degree[part.name()] = degree.get(part.name(), 0) + 1
  chosen = sorted(degree, key=lambda n: (-degree[n], n))[:num_labels]
  index = {name: i for i, name in enumerate(chosen)}
  relations = sorted({(index[w], index[p]) for w, p in links if w in index and p in index})
  return chosen, relations


def parents_table(wn, names: list[str]):
  """Each synset's direct is-a parents as ids into a list of parent synsets:
  (parents_YxG int32, −1 padded; parent names). The first parent is column 0."""
  import numpy as np
  parent_ids: dict[str, int] = {}
  rows = []
  for name in names:
    ids = []
    for p in hypernyms(wn.synset(name)):
      ids.append(parent_ids.setdefault(p.name(), len(parent_ids)))
    rows.append(ids or [parent_ids.setdefault(f'<root:{name}>', len(parent_ids))])
  width = max(len(r) for r in rows)
  table = np.full((len(names), width), -1, np.int32)
  for i, r in enumerate(rows):
    table[i, :len(r)] = r
  return table, list(parent_ids)


def _memo(source, what: str, key, compute):
  """compute()'s JSON value, kept beside the prepared copy (`prepare`) under a
  name hashed from `what`, `key` and the database's size: reading WordNet's
  82k noun synsets costs about 10 s a process, and every launch of a parts or
  WordNet run (tests, a pod's processes) would pay it again."""
  source = pathlib.Path(source)
  root = prepare(source)  # first: WordNetMissing, naming the package, where it is absent
  stamp = [(source / f).stat().st_size for f in ('data.noun', 'index.noun')]
  name = hashlib.sha256(json.dumps([what, key, stamp]).encode()).hexdigest()[:16]
  path = root / f'memo-{what}-{name}.json'
  if path.exists():
    try:
      return json.loads(path.read_text())
    except ValueError:
      pass  # a damaged memo is computed again and rewritten
  value = compute()
  _atomic_write(path, json.dumps(value).encode())
  return value


def pairs_among(names: list[str], source: str | os.PathLike = DEBIAN_DIR) -> list[tuple[int, int]]:
  """`part_of_pairs` over WordNet at `source`, kept on disk (`_memo`)."""
  pairs = _memo(source, 'pairs', list(names), lambda: part_of_pairs(load(source), names))
  return [tuple(p) for p in pairs]


def part_of_pairs(wn, names: list[str]) -> list[tuple[int, int]]:
  """(whole, part) index pairs among a vocabulary of synset names ('car.n.01', …);
  names that are not synsets are skipped."""
  index = {n: i for i, n in enumerate(names)}
  pairs = set()
  for name, i in index.items():
    try:
      synset = wn.synset(name)
    except Exception:  # nltk raises WordNetError or ValueError for non-synset names
      continue
    pairs.update((i, index[p.name()]) for p in part_meronyms(synset) if p.name() in index)
  return sorted(pairs)


def synthetic_vocabulary(num_labels: int, source: str = DEBIAN_DIR) -> synthetic.Vocabulary:
  """The synthetic generator's labels in WordNet mode: the `num_labels` visual
  noun synsets with the most part-of links among them, their is-a parents and
  part-of relations (kept on disk after the first: `_memo`)."""
  import numpy as np

  def compute():
    wn = load(source)
    names, relations = part_of_vocabulary(wn, num_labels)
    return {'names': names, 'parents': parents_table(wn, names)[0].tolist(),
            'relations': relations}

  v = _memo(source, 'vocabulary', num_labels, compute)
  return synthetic.Vocabulary(v['names'], np.asarray(v['parents'], np.int32),
                              [tuple(r) for r in v['relations']])

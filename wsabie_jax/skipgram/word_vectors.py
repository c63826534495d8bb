"""Pretrained word vectors: word2vec / GloVe text files, aligned to a tag vocabulary.

Paper 004 §3.1 seeds the final layer with a pretrained text embedding and
§2.1 orders the words V∪ = [V_I | V_D]: the tags seen in training first, then
the words only the text corpus has. `align` builds that table; `read_text`
reads either text format:

  word2vec text: a header line "<count> <dim>", then "<word> <dim numbers>" per line;
  GloVe text:    no header, "<word> <dim numbers>" per line.

A word may contain spaces (some GloVe files have them): the last `dim` tokens
of a line are the numbers and the rest is the word.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from wsabie_jax.config.schema import check_ranges
from wsabie_jax.data.dataset import DataError


@dataclasses.dataclass(frozen=True)
class WordsConfig:
  """Where V∪'s initial vectors come from (config section `words`)."""
  source: str = 'synthetic'     # the generator's "pretrained" vectors | 'file': word2vec /
                                # GloVe text at `path` | 'random': N(0, 1/D)
  path: str = ''
  extra: int = 500              # text-only words (V_D) kept besides the labels
  noise: float = 0.5            # synthetic: how far from the latent label space
  scale: float = 2.0            # synthetic: the vectors' length

  def __post_init__(self):
    if self.source not in ('synthetic', 'file', 'random'):
      raise ValueError(f"words.source={self.source!r} is not 'synthetic', 'file' or 'random'")
    check_ranges(self, 'words', extra='>=0', noise='>=0', scale='>0')


def read_text(path, keep: set[str] | None = None, max_other: int = 0):
  """(words, vectors_NxD float32) from a word2vec or GloVe text file.

  `keep`: words to read wherever they are; with `max_other`, also the first
  `max_other` other words (files list words by corpus frequency, so these are
  the most frequent). `keep=None` reads everything. Duplicate words keep their
  first vector. Bad lines raise a DataError naming the file and line.
  """
  words, rows, seen = [], [], set()
  other = 0
  dim = None
  with open(path, encoding='utf-8') as f:
    for line_no, line in enumerate(f, 1):
      tokens = line.rstrip('\n').rstrip(' ').split(' ')
      if line_no == 1 and len(tokens) == 2 and all(t.isdigit() for t in tokens):
        dim = int(tokens[1])  # word2vec header
        continue
      if not line.strip():
        continue
      if dim is None:
        dim = len(tokens) - 1
        if dim < 1:
          raise DataError(path, line_no, 'expected a word followed by its vector')
      if len(tokens) < dim + 1:
        raise DataError(path, line_no, f'expected a word and {dim} numbers, got {len(tokens)} tokens')
      word = ' '.join(tokens[:-dim])
      if word in seen:
        continue
      wanted = keep is None or word in keep
      if not wanted and other >= max_other:
        continue
      try:
        vector = np.asarray(tokens[-dim:], np.float32)
      except ValueError:
        raise DataError(path, line_no, f'the vector of {word!r} is not {dim} numbers') from None
      if not np.all(np.isfinite(vector)):
        raise DataError(path, line_no, f'the vector of {word!r} is not finite')
      other += not wanted
      seen.add(word)
      words.append(word)
      rows.append(vector)
  if dim is None:
    raise DataError(path, None, 'no word vectors in the file')
  return words, np.stack(rows) if rows else np.zeros((0, dim), np.float32)


def write_text(path, words: list[str], vectors_NxD: np.ndarray, header: bool = True):
  """Writes word2vec text (header=True) or GloVe text (header=False)."""
  with open(path, 'w', encoding='utf-8') as f:
    if header:
      f.write(f'{len(words)} {vectors_NxD.shape[1]}\n')
    for word, row in zip(words, vectors_NxD):
      f.write(word + ' ' + ' '.join(f'{x:.6g}' for x in row) + '\n')


@dataclasses.dataclass
class WordTable:
  """The initial word table V∪ = [V_I | V_D] (paper 004 §2.1).

  Rows 0..num_labels−1 are the data's labels in label-id order (a label the
  text embedding lacks gets a random row); rows after them are words only the
  text embedding has.
  """
  names: list[str]
  vectors_VxD: np.ndarray
  num_labels: int
  covered_Y: np.ndarray  # bool: the label found a pretrained vector

  def coverage(self, label_counts_Y: np.ndarray | None = None) -> dict:
    """How much of the label vocabulary (and of its tag occurrences) has pretrained vectors."""
    out = {'labels_covered': int(self.covered_Y.sum()), 'num_labels': self.num_labels,
           'label_coverage': float(self.covered_Y.mean()) if self.num_labels else 0.0,
           'extra_words': len(self.names) - self.num_labels}
    if label_counts_Y is not None:
      total = max(int(label_counts_Y.sum()), 1)
      out['tag_coverage'] = float(label_counts_Y[self.covered_Y].sum() / total)
    return out


def align(label_names: list[str], words: list[str], vectors_NxD: np.ndarray,
          extra_words: int = 0, seed: int = 0, lowercase_fallback: bool = True) -> WordTable:
  """Rows for every label (exact name, else its lower-case form), then up to
  `extra_words` of the file's other words, in file order.

  Labels with no vector are drawn N(0, s²) with s the pretrained entries' std,
  so they start on the same scale as the rest.
  """
  index = {w: i for i, w in enumerate(words)}
  lower = {}
  if lowercase_fallback:
    for i, w in enumerate(words):
      lower.setdefault(w.lower(), i)
  dim = vectors_NxD.shape[1]
  rng = np.random.default_rng(seed)
  std = float(vectors_NxD.std()) if vectors_NxD.size else 1.0 / math.sqrt(dim)
  found = [index.get(n, lower.get(n.lower())) for n in label_names]
  covered_Y = np.asarray([i is not None for i in found], bool)
  label_rows = rng.normal(0.0, std, (len(label_names), dim)).astype(np.float32)
  hit = np.flatnonzero(covered_Y)
  label_rows[hit] = vectors_NxD[[found[i] for i in hit]]
  used = {found[i] for i in hit}
  extras = [i for i in range(len(words)) if i not in used][:extra_words]
  return WordTable(list(label_names) + [words[i] for i in extras],
                   np.concatenate([label_rows, vectors_NxD[extras]]).astype(np.float32),
                   len(label_names), covered_Y)

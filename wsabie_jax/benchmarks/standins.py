"""Stand-ins for shapes no shipped set has, for choosing defaults and the
panel (benchmarks/panel.py: a set 'standin:NAME'): planted worlds
(data/synthetic.py) with the sizes of data the defaults were never tuned on,
written once as libsvm files, so both systems read them as a user's files.

  text        24k documents, 12k word features with a long-tailed length
              (log-normal σ 1.5: mean ~35 non-zeros, the longest ~60× that), 433
              Zipf labels, ~3.6 a document
  many_labels 13k examples, 1,000 labels, ~20 an example (Delicious' shape)
  small_text  4.9k documents, 1,836 word features (~70 a document), 159
              labels, ~2.4 a document: a small set with long rows
  many_tags   8k images, 12k tags (5 an image, most seen a few times), 1,000
              visual words: more labels than examples

Their figures are never fitted to: the defaults are chosen on validation
splits of the training files (panel_search.choose), and the test files only score.
"""
from __future__ import annotations

import pathlib

from wsabie_jax.core import user_cache
from wsabie_jax.data import libsvm, synthetic

SPECS = {
    'text': (synthetic.SyntheticSpec(num_labels=433, num_features=11_974, nnz=50,
                                     nnz_spread=1.5, mean_labels=4.0, max_labels=24,
                                     signal=0.35, seed=41), 23_936, 6_358),
    'many_labels': (synthetic.SyntheticSpec(num_labels=1_000, num_features=2_000, nnz=80,
                                            mean_labels=28.0, max_labels=80, signal=0.5, zipf=0.8,
                                            seed=42), 12_920, 3_185),
    'small_text': (synthetic.SyntheticSpec(num_labels=159, num_features=1_836, nnz=80,
                                           mean_labels=2.4, max_labels=12, signal=0.4,
                                           seed=44), 4_880, 2_515),
    'many_tags': (synthetic.SyntheticSpec(num_labels=12_335, num_features=1_000, nnz=50,
                                          mean_labels=5.0, max_labels=20, signal=0.5,
                                          group_size=16, seed=43), 8_154, 2_000),
}


def folder(name: str, root: str | None = None) -> pathlib.Path:
  """The folder holding NAME's train.txt and test.txt (libsvm), written on
  first use under `root` (default $WSABIE_JAX_CACHE/standins, else
  ~/.cache/wsabie_jax/standins)."""
  if name not in SPECS:
    raise ValueError(f'stand-in {name!r} is not one of {sorted(SPECS)}')
  root = root or user_cache.root() / 'standins'
  out = pathlib.Path(root) / name
  if not (out / 'test.txt').exists():
    out.mkdir(parents=True, exist_ok=True)
    for split, ds in generate(name).items():
      tmp = out / f'{split}.txt.partial'
      libsvm.write_libsvm(ds, tmp)
      tmp.rename(out / f'{split}.txt')  # whole files only: a killed write is redone
  return out


def generate(name: str, scale: float = 1.0) -> dict:
  """{'train': SparseDataset, 'test': …} of stand-in NAME (`scale` < 1: fewer
  rows of the same world, for tests)."""
  spec, n_train, n_test = SPECS[name]
  world = synthetic.make_world(spec)
  return {split: synthetic.generate(spec, max(int(n * scale), 1), split, world=world)
          for split, n in (('train', n_train), ('test', n_test))}

"""WSABIE + WARP on the synthetic data in WordNet mode: psib@k from real is-a relations.

  python launch/train.py --config=configs/wsabie_wordnet.py --workdir=runs/wordnet

The default synthetic job (configs/wsabie_synthetic.py) with its labels made
the 1,000 visual WordNet noun synsets with the most part-of links (needs
Debian's wordnet-base): a label shares visual words with its WordNet
siblings, and sibling precision (paper 000 §4) credits a predicted synset
that shares a direct is-a parent with a true one (its results:
docs/PARTS.md). `:small`: 300 synsets.
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  small = parse_arg(arg, flags=('small',), where='wsabie_wordnet.py')['small']
  c = config_lib.load(os.path.join(_HERE, 'wsabie_synthetic.py') + (':small' if small else ''))
  c.data.synthetic.update(vocabulary='wordnet', num_labels=300 if small else 1000)
  return c

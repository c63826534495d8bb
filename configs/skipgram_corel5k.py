"""Paper 004's objectives on Corel5k (real data, 374 labels), one config per row.

  python launch/train.py --config=configs/skipgram_corel5k.py:proposed --workdir=W

Rows as configs/skipgram_synthetic.py (proposed, full, s_fixed, fixed,
s_fast0tag, fast0tag), "ROW[,small]". No text embedding ships offline, so the
word vectors start at random (`words.source='random'`) unless
`--config.words.source=file --config.words.path=glove.6B.300d.txt` points at
one: then the fixed-vector rows mean what they mean in the paper. The tower
reads Corel5k's 499 blob features (plus a bias feature); data and schedule
as configs/wsabie_corel5k.py; model chosen on validation p@5. Negatives are
drawn uniformly over the tags (`loss.negative_power=0`, toward footnote 3's
"inverse distribution of the tag frequency"), not ∝ tag count as eq. (1)'s
default: with random word vectors the count-weighted draws push the frequent
tags down and the model ranks below the frequency baseline (docs/SKIPGRAM.md
"On Corel5k").
"""
import os

import ml_collections

from wsabie_jax import config as config_lib
from wsabie_jax.config import parse_arg
from wsabie_jax.methods import skipgram

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(arg: str = 'proposed') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'row': skipgram.ROWS}, flags=('small',), where='skipgram_corel5k.py')
  corel = config_lib.load(os.path.join(_HERE, 'wsabie_corel5k.py') + (':small' if a['small'] else ''))
  c = skipgram.base_config(corel.data, train=corel.train)
  c.words.update(source='random', extra=0)
  c.model.widths = (512, 300)
  c.train.update(batch_size=64, eval_every_steps=100, select_metric='p@5')
  c.loss.negative_power = 0.0  # uniform negatives (the docstring)
  return skipgram.apply_row(c, a['row'])

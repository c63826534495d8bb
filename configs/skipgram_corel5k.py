"""Paper 004's objectives on Corel5k (real data, 374 labels), one config per row.

  python launch/train.py --config=configs/skipgram_corel5k.py:proposed --workdir=W

Rows as configs/skipgram_synthetic.py (proposed, full, s_fixed, fixed,
s_fast0tag, fast0tag). No text embedding ships offline, so the word vectors
start at random (`words.source='random'`) unless `--config.words.source=file
--config.words.path=glove.6B.300d.txt` points at one: then the fixed-vector
rows mean what they mean in the paper. The tower reads Corel5k's 499 blob
features (plus a bias feature); model chosen on validation p@5.
"""
import ml_collections

from configs import skipgram_synthetic, wsabie_corel5k


def get_config(arg: str = 'proposed') -> ml_collections.ConfigDict:
  row, _, size = arg.partition(',')
  c = skipgram_synthetic.skipgram_base(wsabie_corel5k.get_config(size or None))
  c.words.source, c.words.extra = 'random', 0
  c.model.widths = (512, 300)
  c.train.batch_size = 64
  c.train.eval_every_steps = 100
  c.train.select_metric = 'p@5'
  return skipgram_synthetic.apply_row(c, row)

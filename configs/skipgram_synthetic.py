"""Paper 004's image–word objectives on the synthetic data, one config per table row.

  python launch/train.py --config=configs/skipgram_synthetic.py:proposed --workdir=W
  python launch/compare_skipgram.py --study=table --workdir=runs/skipgram

The argument is "ROW[,zeroshot][,sweep][,paper][,small]"; ROW is one of paper 004
Table 3's rows (methods/skipgram.py apply_row):
  proposed    sampled eq. (1), word vectors optimised jointly (S+Opt+X-Ent)
  full        eq. (1) over every tag, joint (Opt+X-Ent, "Full Cross-entropy")
  s_fixed     sampled eq. (1), fixed word vectors ("Sampled Fixed WV")
  fixed       eq. (1) over every tag, fixed word vectors ("Fixed WV")
  s_fast0tag  eq. (5) over the sampled P×N pairs, fixed word vectors
  fast0tag    eq. (5) over every (tag, non-tag) pair, fixed word vectors (Fast0Tag)
`sweep` is the smaller world of the Fig. 2 sweeps (Y = 291 labels, IAPR TC-12's
count; 10,000 train images; 15 epochs). `zeroshot` holds out 20% of the labels
from training (Table 2's protocol); test P/R/F1@5 on them are reported as
zeroshot_* (their vectors as training left them) and zeroshot_oov_* (after
the OOV pass of eq. (4)). `paper` uses the paper's tower widths.

Data: 20,000 train (10% validation) / 2,000 test planted images, Y = 1,000
labels, d = 5,000 visual words. Word vectors: the generator's "pretrained"
text embedding (a noisy copy of its latent label space, D = 300) with 500
text-only words. Tower: d → 1024 → 300 (`model.widths`; the paper's is
4096 → 8192 → 2048 → 300, `:paper`).

Every row's seen-label and zero-shot results, with their commands:
docs/SKIPGRAM.md.
"""
import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config
from wsabie_jax.methods import skipgram


def get_config(arg: str = 'proposed') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'row': skipgram.ROWS}, flags=('small', 'zeroshot', 'paper', 'sweep'),
                where='skipgram_synthetic.py')
  small = a['small']
  data = data_config.synthetic_data(small=small)
  if not small:
    data.update(num_train=20_000, num_test=2_000)
    data.synthetic.update(num_labels=1000, num_features=5000, signal=0.5)
  c = skipgram.base_config(data)
  if small:
    c.model.widths = (128, 64)
    c.train.update(num_epochs=5, eval_every_steps=50, checkpoint_every_steps=100)
    c.words.extra = 50
    c.oov.update(steps=200, rows_per_step=64, cols_per_step=256)
  else:
    c.train.update(num_epochs=30, eval_every_steps=200)
  if a['sweep'] and not small:
    c.data.update(num_train=10_000, num_test=2_000)
    c.data.synthetic.num_labels = 291
    c.train.update(num_epochs=15, eval_every_steps=100, patience=100)
  if a['paper']:
    c.model.widths = (4096, 8192, 2048, 300)
  if a['zeroshot']:
    c.data.holdout_fraction = 0.2
  return skipgram.apply_row(c, a['row'])

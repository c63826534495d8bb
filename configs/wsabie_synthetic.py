"""WSABIE + WARP on the embedded synthetic data (the default job).

  python launch/train.py --config=configs/wsabie_synthetic.py --workdir=workdirs/synthetic

50,000 train (10% held out for validation) / 5,000 test planted images,
Y = 2,000 labels in sibling groups of 8, d = 10,000 visual words, ~40 word
draws per image (35% from the image's labels); D = 64, K = 100 draws, row-wise
Adagrad, 15 epochs. Measured on a 2-core CPU: 17 s of training (81,000
pairs/s), test p@1 0.662, p@10 0.133, psib@10 0.561, MAP 0.598 — the frequency
baseline gets p@1 0.176, p@10 0.052, psib@10 0.054.

`:small` (200 labels, 4,000 images, ~3 s of training) is for tests and quick checks.
"""
import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0

  c.data = ml_collections.ConfigDict()
  c.data.kind = 'synthetic'
  c.data.num_train = 50_000
  c.data.num_test = 5_000
  c.data.synthetic = ml_collections.ConfigDict(dict(
      num_labels=2000, num_features=10_000, nnz=40, mean_labels=2.0, max_labels=8,
      group_size=8, zipf=1.0, signal=0.35, words_per_label=16, sibling_share=0.5,
      sibling_labels=0.5, seed=0))
  c.data.normalize = 'l2'
  c.data.bias_feature = 0.0   # > 0: a constant extra feature (a learnt label prior)
  c.data.validation_fraction = 0.1
  c.data.split_seed = 0

  c.model = ml_collections.ConfigDict()
  c.model.dim = 64            # D
  c.model.max_norm = 1.0      # C in eqs. (2)–(3)
  c.model.score = 'dot'       # or 'neg_euclidean' (paper 001), 'neg_sq_euclidean'

  c.loss = ml_collections.ConfigDict()
  c.loss.kind = 'warp'        # 'warp' | 'auc' | 'exact' (OWPC-SGD reference)
  c.loss.num_draws = 100      # K: fixed budget of parallel negative draws
  c.loss.rank_weights = 'harmonic'   # α_j = 1/j | 'mean_rank' | 'top1'
  c.loss.rank_estimate = 'first_violator'  # ⌊(Y−1)/N⌋ | 'violator_count'
  c.loss.violators = 'first'  # Alg. 1's first violator | 'all' violators among the K draws
  c.loss.margin = 1.0
  c.loss.sampler = 'uniform'  # Alg. 1's uniform draws | 'adaptive' (VSE-ens, paper 003)
  c.loss.rank_scale = 0.01    # adaptive: λ relative to Y (mean drawn rank ≈ λ·Y)
  c.loss.refresh_every_pairs = 0  # adaptive: re-sort the factor lists (0: every Y·ln Y pairs)

  c.optim = ml_collections.ConfigDict()
  c.optim.kind = 'adagrad'    # row-wise Adagrad | 'sgd' (fixed rate, as the paper)
  c.optim.learning_rate = 0.1
  c.optim.adagrad_init = 0.1

  c.train = ml_collections.ConfigDict()
  c.train.batch_size = 256
  c.train.num_epochs = 15
  c.train.max_steps = 0       # > 0 overrides num_epochs
  c.train.max_seconds = 0.0   # > 0: stop on this wall-clock budget
  c.train.log_every_steps = 50
  c.train.eval_every_steps = 1000
  c.train.eval_subset = 2000  # validation images per evaluation
  c.train.patience = 4        # evaluations without improvement before stopping
  c.train.checkpoint_every_steps = 2000
  c.train.select_metric = 'p@1'
  c.train.num_devices = 0     # data parallel over this many devices (0: all)
  c.train.probe_pairs = 0     # > 0: at each validation, Alg. 1's expected draws per update
                              # on this many training pairs (paper 003 Fig. 1)

  c.eval = ml_collections.ConfigDict()
  c.eval.ks = (1, 5, 10)
  c.eval.f1_k = 5
  c.eval.batch_size = 256
  c.eval.label_chunk = 4096

  if arg == 'small':
    c.data.num_train, c.data.num_test = 4000, 500
    c.data.synthetic.num_labels, c.data.synthetic.num_features = 200, 1000
    c.data.synthetic.signal = 0.5
    c.train.num_epochs = 5
    c.train.eval_every_steps = 50
    c.train.checkpoint_every_steps = 100
  elif arg:
    raise ValueError(f'unknown config argument {arg!r} (expected "small")')
  return c

"""Objects and parts (paper 002) on the synthetic data in WordNet mode, one config per model.

  python launch/train.py --config=configs/parts_synthetic.py:shared,iw --workdir=W
  python launch/compare_parts.py --workdir=runs/parts

The argument is "SHARING,SELECTION[,paper][,small]": SHARING shared | unshared
(f_I reads W, or its own U); SELECTION iw | i: the model is chosen on
validation Part-Object Labeling MAP scored as Image-Word (with α f_L) or Image
(without), §6.2's four models. `paper`: the paper's protocol instead — plain
SGD at the first of its rates (0.01 for W/U, 0.1 for V; its grid also has
0.001 and 0.01) and selection on validation mean rank (launch/reproduce.py's
default for tables 002-3 and 002-5). Test reports every task under both scorings and the
WordNet-offset one (io_*, λ = 100 on the relations training saw, §6.5); 10%
of the relations are kept out of training, and unseen_* reports the test
quadruplets of those, with *_couples_* ranking the true couple among all
relations (Table 5's protocol).

Data: 60,000 synthetic images whose labels are the 1,000 visual WordNet noun
synsets with the most part-of links among them (799 relations; paper 002:
1,000 synsets, 771 relations), a label's visual words shared with its is-a
siblings; split 80/10/10 and paired through part-of into quadruplets (the
part image never the object's). D = 64, γ = 100, α = 0.1, ‖W_i‖, ‖V_i‖ ≤ 1:
methods/parts.py's defaults. `small`: 300 synsets, 6,000 images, 300 steps.
"""
import ml_collections

from wsabie_jax.config import parse_arg
from wsabie_jax.data import settings as data_config
from wsabie_jax.methods import parts


def get_config(arg: str = 'shared,iw') -> ml_collections.ConfigDict:
  a = parse_arg(arg, choices={'sharing': ('shared', 'unshared'), 'selection': ('iw', 'i')},
                flags=('paper', 'small'), where='parts_synthetic.py')
  data = None
  if a['small']:
    data = data_config.synthetic_data(small=True, vocabulary='wordnet', num_labels=300,
                                  num_features=2000, signal=0.5)
    data.update(num_train=6000, num_test=1000)
  c = parts.base_config(data)
  c.model.shared = a['sharing'] == 'shared'
  c.train.select_metric = f'{a["selection"]}_pair_map'
  if a['paper']:
    c.optim.update(kind='sgd', learning_rate_W=0.01, learning_rate_V=0.1)
    c.train.select_metric = f'{a["selection"]}_pair_mean_rank'
  if a['small']:
    c.proxy.update(num_valid=500, num_test=500)
    c.train.update(max_steps=300, eval_every_steps=100)
  return c

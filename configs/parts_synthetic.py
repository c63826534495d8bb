"""Objects and parts (paper 002) on the synthetic data in WordNet mode, one config per model.

  python launch/train.py --config=configs/parts_synthetic.py:shared,iw --workdir=W
  python launch/compare_parts.py --workdir=workdirs/parts

The argument is "SHARING,SELECTION[,small]": SHARING shared | unshared (f_I
reads W, or its own U); SELECTION iw | i: the model is chosen on validation
Part-Object Labeling MAP scored as Image-Word (with α f_L) or Image (without),
§6.2's four models. Test reports every task under both scorings and the
WordNet-offset one (io_*, λ = 100 on the relations training saw, §6.5); 10%
of the relations are kept out of training, and unseen_* reports the test
quadruplets of those, with *_couples_* ranking the true couple among all
relations (Table 5's protocol).

Data: 60,000 synthetic images whose labels are the 1,000 visual WordNet noun
synsets with the most part-of links among them (799 relations; paper 002:
1,000 synsets, 771 relations), a label's visual words shared with its is-a
siblings; split 80/10/10 and paired through part-of into quadruplets (the
part image never the object's). D = 64, γ = 100, α = 0.1, ‖W_i‖, ‖V_i‖ ≤ 1.
"""
import ml_collections

from configs import wsabie_synthetic


def get_config(arg: str = 'shared,iw') -> ml_collections.ConfigDict:
  sharing, selection, *rest = arg.split(',') + ['']
  if sharing not in ('shared', 'unshared') or selection not in ('iw', 'i') or set(rest) - {'', 'small'}:
    raise ValueError(f'config argument {arg!r}: expected "shared|unshared,iw|i[,small]"')
  small = 'small' in rest
  c = wsabie_synthetic.get_config('small' if small else None)
  c.method = 'parts'
  c.data.synthetic.update(vocabulary='wordnet', num_labels=300 if small else 1000,
                          num_features=2000 if small else 5000, signal=0.5)
  c.data.num_train, c.data.num_test = (6000, 1000) if small else (60_000, 0)
  c.data.validation_fraction = 0.0   # the proxy builder splits the images itself
  c.model = ml_collections.ConfigDict(dict(dim=64, max_norm=1.0, shared=sharing == 'shared',
                                           alpha=0.1, score='dot'))
  c.loss = ml_collections.ConfigDict(dict(num_draws=100, margin=1.0))  # γ
  c.optim = ml_collections.ConfigDict(dict(kind='adagrad', learning_rate_V=0.05,
                                           learning_rate_W=0.05, adagrad_init=0.1))
  c.parts = ml_collections.ConfigDict(dict(
      min_images=10, num_valid=500 if small else 2000, num_test=500 if small else 5000,
      offset=100.0,  # λ of §6.5
      unseen_fraction=0.1,  # relations kept out of training, in test (§6.5, Table 5)
      nearest_queries=('toe.n.01', 'radio-phonograph.n.01', 'loudspeaker.n.01', 'car.n.01',
                       'wheel.n.01')))
  c.train.update(batch_size=256, max_steps=300 if small else 6000, eval_every_steps=100 if small else 500,
                 checkpoint_every_steps=2000, patience=6, select_metric=f'{selection}_pair_map')
  return c

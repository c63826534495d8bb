"""One schema for every config section: the shared ones (train, eval, data)
are dataclasses like the methods' (training/settings.py, data/settings.py),
each default written once; 'auto' fields are fitted when the run starts;
--print_config says where each value came from."""
import dataclasses

import ml_collections
import pytest

from wsabie_jax import config as config_lib, methods
from wsabie_jax import data as data_lib
from wsabie_jax.config.schema import ConfigError, defaults
from wsabie_jax.data import corel5k_paths, settings as data_settings
from wsabie_jax.api import config_view
from wsabie_jax.methods import skipgram, wsabie
from wsabie_jax.training import settings, workdir


def test_the_sections_are_their_dataclasses_defaults():
  c = wsabie.base_config()
  assert c.train.to_dict() == defaults(settings.TrainConfig)
  assert {k: tuple(v) if isinstance(v, list) else v for k, v in c.eval.items()} == \
      defaults(settings.EvalConfig)
  assert c.data.to_dict() == defaults(data_settings.SyntheticData)
  assert c.train.steps_per_call == settings.TrainConfig.steps_per_call == 0  # the platform's


def test_a_hand_made_config_gets_every_default():
  """A config without train.steps_per_call runs the preset's 16 steps a call
  (not a fallback's 1), and validation checks every key, not only those present."""
  c = ml_collections.ConfigDict({'method': 'wsabie', **{k: v for k, v in wsabie.base_config().items()
                                                        if k in ('model', 'loss', 'optim')}})
  c.data = ml_collections.ConfigDict({'kind': 'mulan', 'train_path': 'a', 'test_path': 'b'})
  c.train = ml_collections.ConfigDict({'batch_size': 8})
  c = methods.check(c)
  assert c.train.steps_per_call == 0 and c.train.batch_size == 8 and c.seed == 0
  assert c.eval.ks == (1, 5, 10) and c.data.labels_path == '' and c.data.feature_base == 0


@pytest.mark.parametrize('field, value, message', [
    ('train.bogus', 1, r"config.train: unknown field\(s\) \['bogus'\]"),
    ('train.batch_size', 0, r'config.train.batch_size=0 must be ≥ 1'),
    ('train.batch_size', 'many', r"config.train.batch_size='many': expected int or 'auto'"),
    ('train.patience', 1.5, r'config.train.patience=1.5: expected int'),
    ('train.platform', 'fpga', r"config.train.platform='fpga' is not one of"),
    ('eval.ks', (0, 5), r'config.eval.ks=\(0, 5\) must be positive ranks'),
    ('data.validation_fraction', 1.0, r'config.data.validation_fraction=1.0 must be in \[0, 1\)'),
    ('data.kind', 'csv', r"config.data.kind='csv' is not one of"),
    ('data.synthetic.signal', 2.0, r'config.data.synthetic.signal=2.0 must be in \[0, 1\]'),
    ('data.features', 'image_id', r"config.data.features='image_id' needs"),
    ('seed', -1, r'config.seed=-1 must be ≥ 0'),
])
def test_one_mechanism_names_the_bad_field(field, value, message):
  c = wsabie.base_config()
  node, key = c, field
  with c.ignore_type():
    *path, key = field.split('.')
    for part in path:
      node = node[part]
    node[key] = value
  with pytest.raises(ConfigError, match=message):
    methods.check(c)


def test_auto_fields_are_fitted_when_the_run_starts(monkeypatch):
  """Loading the Mulan config reads no data (was: the training file, while the
  flags were parsed, so --config.data.train_path=OTHER kept Corel5k's B, Q, K)."""
  monkeypatch.setattr(data_lib, 'read_split', lambda *a, **k: pytest.fail('read while loading'))
  c = config_lib.load('configs/wsabie_mulan.py')
  assert (c.train.batch_size, c.train.positives_per_row, c.loss.num_draws) == ('auto',) * 3
  methods.check(c)  # 'auto' is a valid value of those fields
  c.train.batch_size = 64  # a number replaces 'auto' in Python ...
  with c.ignore_type():
    c.loss.num_draws = '50'  # ... and on the command line (absl parses it as the str it replaced)
  c = methods.check(c)
  assert c.train.batch_size == 64
  monkeypatch.undo()
  fitted, values = wsabie.fit(c)
  assert values == {'loss.kind': 'warp', 'loss.draws': 'per_row', 'loss.violators': 'first',
                    'loss.rank_estimate': 'first_violator', 'optim.learning_rate': 0.01,
                    'train.positives_per_row': 5, 'model.ensemble': 'one_vs_rest+logistic+svm+kernel',
                    'model.neighbours': 30, 'data.standardize': 'none'}
  assert (fitted.train.batch_size, fitted.loss.num_draws) == (64, 50)


def test_a_method_that_fits_nothing_refuses_auto():
  c = skipgram.base_config(data_settings.synthetic_data(small=True))
  c.train = config_lib.schema.auto(c.train, 'batch_size')
  with pytest.raises(ConfigError, match=r"config.train.batch_size='auto': method 'skipgram' "
                                        'fits no values'):
    settings.check_fitted(methods.check(c), 'skipgram')


@pytest.mark.parametrize('platform, cpus, want', [
    ('cpu', 2, {'steps_per_call': 16, 'input_threads': 1}),
    ('cpu', 64, {'steps_per_call': 16, 'input_threads': 1}),  # (the host is the device)
    ('gpu', 16, {'steps_per_call': 64, 'input_threads': 8}),
    ('tpu', 4, {'steps_per_call': 64, 'input_threads': 3}),   # the host's other cores
    ('gpu', 1, {'steps_per_call': 64, 'input_threads': 1})])
def test_the_calls_are_fitted_to_the_platform(platform, cpus, want):
  """train.steps_per_call and train.input_threads at 0 take the platform's
  values (by hand: the rule as training/settings.py states it); a number given
  is kept."""
  train = settings.train()
  assert settings.for_platform(train, platform, cpus) == want
  train.update(steps_per_call=5, input_threads=2)
  assert settings.for_platform(train, platform, cpus) == {}


def test_what_a_resume_may_change_is_marked_on_the_fields():
  assert workdir.MAY_CHANGE == {
      'train.max_seconds', 'train.num_epochs', 'train.max_steps', 'train.log_every_steps',
      'train.eval_every_steps', 'train.evals_per_budget', 'train.checkpoint_every_steps',
      'train.patience', 'train.plateau_drops', 'train.refit', 'train.refit_reserved',
      'train.num_devices', 'train.platform', 'train.steps_per_call', 'train.input_threads',
      'train.gather_ahead', 'train.call_length', 'train.deterministic', 'train.profile_calls',
      'eval.batch_size',
      'eval.label_chunk',
      'loss.label_chunk',
      'model.ensemble_choice', 'model.ensemble_pick', 'model.ensemble_choice_seconds'}


def test_print_config_names_where_each_value_came_from():
  c = methods.check(config_lib.load('configs/wsabie_mulan.py'))
  with c.ignore_type():
    c.model.dim = 64
  fitted, values = wsabie.fit(c)
  fitted, on_cpu = settings.fitted_to_platform(fitted, 'cpu')
  values.update(on_cpu)
  rows = {name: (value, source) for name, value, source in
          config_view.rows(fitted, values, ['model.dim'])}
  assert rows['train.batch_size'] == (512, 'fitted')
  assert rows['loss.num_draws'] == (100, 'fitted')
  assert rows['model.dim'] == (64, 'flag')
  assert rows['model.max_norm'] == (100.0, 'config file')
  assert rows['data.train_path'] == (corel5k_paths()[0], 'config file')
  assert rows['train.steps_per_call'] == (16, 'fitted')
  assert rows['seed'] == (0, 'default')
  fields = {f'train.{f.name}' for f in dataclasses.fields(settings.TrainConfig)}
  assert fields <= set(rows)
  assert '512' in config_view.text(fitted, values, ['model.dim'])

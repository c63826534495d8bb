"""End to end through the command-line entry points, as a user runs them."""
import json
import os
import subprocess
import sys

import pytest

from configs import wsabie_synthetic
from wsabie_jax.data import libsvm, synthetic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTRACT = ['p@1', 'p@5', 'p@10', 'r@5', 'r@10', 'map', 'auc', 'mean_rank', 'train_seconds',
            'train_examples_per_sec', 'steps', 'psib@10']


def _run(*args):
  env = dict(os.environ, XLA_FLAGS='')  # one device, as a user's laptop
  out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
  workdir = tmp_path_factory.mktemp('run')
  _run('launch/train.py', '--config=configs/wsabie_synthetic.py:small', f'--workdir={workdir}',
       '--config.train.num_epochs=3')
  return workdir


def test_train_writes_metrics_json(workdir):
  metrics = json.loads((workdir / 'metrics.json').read_text())
  for key in CONTRACT:
    assert isinstance(metrics[key], (int, float)), key
  assert metrics['num_images'] == 500
  # Clearly better than always predicting the most frequent labels.
  assert metrics['p@1'] > 2 * metrics['freq_p@1']
  assert metrics['psib@10'] > metrics['freq_psib@10']
  assert (workdir / 'tensorboard').is_dir() and any((workdir / 'best').iterdir())


def test_evaluate_reproduces_test_metrics(workdir):
  out = json.loads(_run('launch/evaluate.py', f'--workdir={workdir}', '--baseline'))
  metrics = json.loads((workdir / 'metrics.json').read_text())
  for key in ('p@1', 'p@10', 'map', 'psib@10', 'freq_p@1'):
    assert out[key] == pytest.approx(metrics[key]), key


def test_annotate_prints_label_names(workdir, tmp_path):
  spec = synthetic.SyntheticSpec(**wsabie_synthetic.get_config('small').data.synthetic)
  path = tmp_path / 'new.txt'
  libsvm.write_libsvm(synthetic.generate(spec, 3, split='test'), path)
  lines = _run('launch/annotate.py', f'--workdir={workdir}', f'--input={path}', '--k=4').splitlines()
  assert len(lines) == 3
  for i, line in enumerate(lines):
    assert line.startswith(f'{i}: g') and line.count('(') == 4 and '[true: g' in line


def test_unknown_config_key_is_an_error(tmp_path):
  env = dict(os.environ, XLA_FLAGS='')
  out = subprocess.run([sys.executable, 'launch/train.py', '--config=configs/wsabie_synthetic.py:small',
                        f'--workdir={tmp_path}', '--config.train.num_epoch=3'], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode != 0 and 'num_epoch' in out.stderr


def test_compare_samplers_writes_table_and_figure(tmp_path):
  out = _run('launch/compare_samplers.py', '--data=synthetic', '--small', '--rows=warp,vse_warp',
             f'--workdir={tmp_path}')
  table = (tmp_path / 'table.md').read_text()
  assert table in out and '| vse_warp |' in table and '5.02×' in table
  draws = (tmp_path / 'fig1_draws_per_update.csv').read_text().splitlines()
  assert draws[0] == 'step,draws_per_update' and len(draws) > 3
  assert (tmp_path / 'fig1_draws_per_update.svg').read_text().startswith('<svg')

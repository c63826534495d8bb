"""End to end through the command-line entry points, as a user runs them."""
import json
import math
import os
import subprocess
import sys

import jax
import pytest

from tests import helpers
from wsabie_jax.api import configs
from wsabie_jax.reproduce import runner
from wsabie_jax.data import libsvm, synthetic

pytestmark = pytest.mark.slow  # launch scripts end to end, in subprocesses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTRACT = ['p@1', 'p@5', 'p@10', 'r@5', 'r@10', 'map', 'auc', 'mean_rank', 'train_seconds',
            'train_examples_per_sec', 'steps', 'psib@10']


def _run(*args):
  env = helpers.one_device_env()
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
  out = json.loads(_run('launch/evaluate.py', f'--workdir={workdir}', '--baseline', '--json'))
  metrics = json.loads((workdir / 'metrics.json').read_text())
  for key in ('p@1', 'p@10', 'map', 'psib@10', 'freq_p@1'):
    assert out[key] == pytest.approx(metrics[key]), key


def test_annotate_prints_label_names(workdir, tmp_path):
  spec = synthetic.SyntheticSpec(**configs.load('wsabie_synthetic:small').data.synthetic)
  path = tmp_path / 'new.txt'
  libsvm.write_libsvm(synthetic.generate(spec, 3, split='test'), path)
  lines = _run('launch/annotate.py', f'--workdir={workdir}', f'--input={path}', '--k=4').splitlines()
  assert len(lines) == 3
  for i, line in enumerate(lines):
    assert line.startswith(f'{i}: g') and line.count('(') == 4 and '[true: g' in line


def test_unknown_config_key_is_an_error(tmp_path):
  env = helpers.one_device_env()
  out = subprocess.run([sys.executable, 'launch/train.py', '--config=configs/wsabie_synthetic.py:small',
                        f'--workdir={tmp_path}', '--config.train.num_epoch=3'], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode != 0 and 'num_epoch' in out.stderr


@pytest.fixture(scope='module')
def skipgram_workdir(tmp_path_factory):
  workdir = tmp_path_factory.mktemp('skipgram')
  _run('launch/train.py', '--config=configs/skipgram_synthetic.py:proposed,small,zeroshot',
       f'--workdir={workdir}')
  return workdir


def test_skipgram_run_reports_seen_and_zero_shot_metrics(skipgram_workdir):
  m = json.loads((skipgram_workdir / 'metrics.json').read_text())
  for key in CONTRACT + ['class_f1@5', 'overall_f1@5', 'zeroshot_class_f1@5',
                         'zeroshot_oov_class_f1@5', 'oov_loss_before', 'oov_loss_after']:
    assert isinstance(m[key], (int, float)), key
  assert m['p@5'] > 1.5 * m['freq_p@5'] and m['oov_loss_after'] < m['oov_loss_before']
  vocab = json.loads((skipgram_workdir / 'vocabulary.json').read_text())
  assert vocab['num_seen_labels'] == 160 and len(vocab['word_names']) == 250
  assert len(json.loads((skipgram_workdir / 'words.json').read_text())) == 250


def test_evaluate_and_annotate_read_a_skipgram_workdir(skipgram_workdir, tmp_path):
  out = json.loads(_run('launch/evaluate.py', f'--workdir={skipgram_workdir}', '--baseline', '--json'))
  m = json.loads((skipgram_workdir / 'metrics.json').read_text())
  for key in ('p@1', 'p@5', 'map', 'class_f1@5', 'freq_p@1'):
    assert out[key] == pytest.approx(m[key], abs=1e-6), key
  spec = synthetic.SyntheticSpec(**configs.load('wsabie_synthetic:small').data.synthetic)
  path = tmp_path / 'new.txt'
  libsvm.write_libsvm(synthetic.generate(spec, 2, split='test'), path)
  lines = _run('launch/annotate.py', f'--workdir={skipgram_workdir}', f'--input={path}',
               '--k=3').splitlines()
  assert len(lines) == 2 and all(line.count('(') == 3 for line in lines)
  lines = _run('launch/annotate.py', f'--workdir={skipgram_workdir}', f'--input={path}',
               '--k=300', '--all_words').splitlines()
  assert '_x' in lines[0]  # text-only words rank too


def test_compare_skipgram_writes_the_sweep(tmp_path):
  """(Its table study is paper 004 Table 3: tests/reproduce_test.py runs it.)"""
  _run('launch/compare_skipgram.py', '--study=sweep', '--small', '--positives=1,5',
       '--negatives=10', f'--workdir={tmp_path / "sweep"}')
  assert '| 5 |' in (tmp_path / 'sweep' / 'table.md').read_text()
  assert (tmp_path / 'sweep' / 'fig2c_positives.svg').read_text().startswith('<svg')


def test_reproduce_writes_the_table_beside_the_paper(tmp_path):
  out = _run('launch/reproduce.py', '--table=000-4', '--data=synthetic', '--small',
             f'--workdir={tmp_path}')
  table = (tmp_path / '000-4.md').read_text()
  assert table in out and 'Paper 000 Table 4' in table and '| D=16 |' in table and '| D=32 |' in table


def test_base_config_names_real_data_configs():
  c = runner.base_config(os.path.join(ROOT, 'configs/wsabie_lear.py') + ':espgame,/data/iccv09')
  assert (c.data.tfds_name, c.data.manual_dir) == ('lear_iccv09/espgame', '/data/iccv09')
  assert runner.base_config('synthetic', small=True).data.num_train == 4000
  with pytest.raises(ValueError, match='expected a config file configs/FILE.py'):
    runner.base_config('imagenet')


def test_every_method_through_every_launch_script(tmp_path):
  """Objects and parts (the third registered method; WSABIE and skip-gram are
  above) trains, then evaluate.py and annotate.py read its workdir."""
  from wsabie_jax import methods
  assert sorted(methods.REGISTRY) == ['parts', 'skipgram', 'wsabie']
  helpers.skip_without_wordnet()
  workdir = tmp_path / 'parts'
  _run('launch/train.py', '--config=configs/parts_synthetic.py:shared,iw,small', f'--workdir={workdir}',
       '--config.train.max_steps=20', '--config.proxy.num_valid=50', '--config.proxy.num_test=100')
  m = json.loads((workdir / 'metrics.json').read_text())
  out = json.loads(_run('launch/evaluate.py', f'--workdir={workdir}', '--json'))
  for key in ('iw_pair_map', 'i_triplet_p@1', 'annot_map', 'io_couples_map'):
    assert out[key] == pytest.approx(m[key], abs=1e-6), key
  vocab = json.loads((workdir / 'vocabulary.json').read_text())
  spec = synthetic.SyntheticSpec(num_labels=5, num_features=vocab['num_features'])
  path = tmp_path / 'new.txt'
  libsvm.write_libsvm(synthetic.generate(spec, 2, split='test'), path)
  lines = _run('launch/annotate.py', f'--workdir={workdir}', f'--input={path}', '--k=3').splitlines()
  assert len(lines) == 2 and all(line.count('.n.') >= 3 for line in lines), lines


@pytest.mark.slow  # a grid row, shards, an epoch and the input suite, tiny
def test_the_device_figures_script_takes_each_table(tmp_path):
  """launch/device_figures.sh (docs/SCALE.md's next device call), SMALL=1 on
  this CPU: each step runs and leaves its table under OUT."""
  env = {**os.environ, 'SMALL': '1', 'PY': sys.executable, 'NTRAIN': '6000', 'WORKERS': '2',
         'OUT': str(tmp_path / 'out'), 'SHARDS': str(tmp_path / 'shards'), 'END': '600'}
  out = subprocess.run(['bash', 'launch/device_figures.sh'], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=700)
  assert out.returncode == 0, out.stderr[-2000:]
  # The grid's one row asked for (accelerator.grid: only the labels and shapes
  # asked), every column filled, what exactness costs at its one cell.
  grid = json.loads((tmp_path / 'out' / 'grid.json').read_text())
  assert [(r['Y'], r['B'], r['K']) for r in grid] == [(500, 256, 10)]
  cpu = jax.devices()[0].platform == 'cpu'
  row, other, call = grid[0], 'static' if cpu else 'traced', f'loop_{16 if cpu else 64}'
  assert row['other_length'] == other
  assert all(row[k] > 0 for k in ('alone', 'alone_gathered', 'alone_fresh', 'alone_trained',
                                  'loop_1', call, f'loop_{other}', 'loop_ahead',
                                  'alone_deterministic', 'alone_tensorfloat32')), row
  for ratio, (a, b) in {'loop_over_alone': (call, 'alone'),
                        'loop_over_fresh': (call, 'alone_fresh'),
                        'loop_over_trained': (call, 'alone_trained'),
                        'ahead_over_fresh': ('loop_ahead', 'alone_fresh')}.items():
    assert math.isclose(row[ratio], row[a] / row[b]), ratio
  assert row['profile']['calls'] == 8, row['profile']
  assert (tmp_path / 'out' / 'trace_first_row.json.gz').stat().st_size
  metrics = json.loads((tmp_path / 'out' / 'webscale_metrics.json').read_text())
  assert metrics['steps'] > 0 and 0 <= metrics['input_wait_seconds'] <= metrics['train_seconds']
  assert 1 <= metrics['profile']['calls'] <= 8, metrics['profile']  # (SMALL's epoch: 3 calls)
  rows = json.loads((tmp_path / 'out' / 'input.json').read_text())['input']
  assert [r['threads'] for r in rows] == [1, 2, 4, 8]
  assert 'test p@1' in out.stdout and '== done after' in out.stdout

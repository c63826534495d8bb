"""tests/grouping.py under the suite's own pytest and xdist: four tests of a
module on two workers make its module fixture once, and an explicit group
(wordnet_test's) holds. pytest 9.2 with xdist 3.8 dropped the groups without
a word (xdist renames the test ids, pytest 9 no longer reads the name it sets:
pyproject.toml keeps pytest below 9)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

MODULE = '''
import os, pytest
@pytest.fixture(scope='module')
def made():
  with open(os.environ['LOG'], 'a') as log:
    log.write('module fixture on ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')
def test_a(made): pass
def test_b(made): pass
def test_c(made): pass
def test_d(made): pass
@pytest.mark.xdist_group('named')
def test_e():
  with open(os.environ['LOG'], 'a') as log:
    log.write('named on ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')
test_f = test_e
def test_g(): pass
def test_h(): pass
'''


def test_a_module_fixture_is_made_once_on_two_workers(tmp_path):
  (tmp_path / 'tests').mkdir()
  (tmp_path / 'tests' / 'conftest.py').write_text('from tests.grouping import pytest_itemcollected\n')
  (tmp_path / 'tests' / 'toy_test.py').write_text(MODULE)
  log = tmp_path / 'log'
  out = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-n', '2', '-p', 'no:cacheprovider',
                        '--dist', 'loadgroup', '--rootdir', str(tmp_path), '-c', os.devnull,
                        'tests/toy_test.py'],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'LOG': str(log), 'PYTHONPATH': str(ROOT)})
  assert out.returncode == 0, out.stdout[-2000:]
  lines = log.read_text().splitlines()
  assert sum(line.startswith('module fixture') for line in lines) == 1, lines
  assert len({line for line in lines if line.startswith('named')}) == 1, lines  # one worker

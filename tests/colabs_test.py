"""The Colab notebooks: stored without outputs, and each runs headless on tiny settings."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests import helpers

pytestmark = pytest.mark.slow  # the notebooks, each a training

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / 'colabs').glob('*.ipynb'))
# Notebooks whose time is their steps: compiled as a user's run is
# (helpers.OPTIMIZED_ENV; samplers took 10.0 s so, 13.8 s without).
STEP_BOUND = ('samplers',)


def _script(notebook: pathlib.Path) -> str:
  """The code cells as one script; shell lines (`!…`, Colab only) become `pass`."""
  cells = json.loads(notebook.read_text())['cells']
  code = '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'code')
  return re.sub(r'^(\s*)!.*$', r'\1pass', code, flags=re.M)


def test_three_notebooks_without_outputs():
  assert [n.stem for n in NOTEBOOKS] == ['objects_and_parts', 'quickstart', 'samplers']
  for n in NOTEBOOKS:
    for cell in json.loads(n.read_text())['cells']:
      if cell['cell_type'] == 'code':
        assert cell['outputs'] == [] and cell['execution_count'] is None, n.name


@pytest.mark.parametrize('notebook', NOTEBOOKS, ids=lambda n: n.stem)
def test_notebook_runs_headless(notebook, tmp_path):
  pytest.importorskip('matplotlib')
  if notebook.stem == 'objects_and_parts' and not os.path.exists('/usr/share/wordnet/data.noun'):
    pytest.skip('WordNet (wordnet-base) is not installed')
  script = tmp_path / f'{notebook.stem}.py'
  script.write_text(_script(notebook))
  # (TMPDIR: the notebooks' temporary workdirs go where pytest removes them)
  env = helpers.one_device_env(WSABIE_TINY='1', MPLBACKEND='Agg', TMPDIR=str(tmp_path),
                              **(helpers.OPTIMIZED_ENV if notebook.stem in STEP_BOUND else {}))
  out = subprocess.run([sys.executable, str(script)], cwd=ROOT / 'colabs', env=env,
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.strip()

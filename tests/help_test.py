"""Every launch script answers --help with its own flags, --config among
them where it has one, and exit status 0 (absl's --help exits 1 and leaves
out flags a library defines, as ml_collections defines --config)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / 'launch').glob('*.py') if 'cli.main(' in p.read_text())


@pytest.mark.parametrize('script', ['train.py', 'evaluate.py', 'make_shards.py'])
def test_help_lists_the_flags_and_exits_0(script):
  out = subprocess.run([sys.executable, f'launch/{script}', '--help'], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  text = out.stdout
  assert '--workdir' in text or '--config' in text
  if 'define_config(' in (ROOT / 'launch' / script).read_text():
    assert '\n  --config: ' in text
  assert text.rstrip().endswith('--helpfull')
  assert not out.stderr.strip()


def test_every_launch_script_goes_through_cli_main():
  """(so --help and the one-line errors hold for each)"""
  assert {'train.py', 'evaluate.py', 'annotate.py', 'featurize.py'} <= set(SCRIPTS)


def test_a_cluster_of_no_process_is_a_usage_error():
  """--num_processes=0 is refused, not exit 0 having run nothing."""
  out = subprocess.run([sys.executable, 'launch/local_cluster.py', '--num_processes=0', '--',
                        '--config=configs/wsabie_synthetic.py:small'], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(
      'error: --num_processes=0: start at least 1'), out.stderr[-2000:]

"""The launch commands that the README, docs/ and the colabs show still parse.

Every flag a page writes must exist and take the value written (absl's own
parse with `--only_check_args`, and `api/cli.parse_flags`'s check of each
`--config.SECTION.FIELD` against the config file's fields), so a renamed or
removed flag cannot leave a page stale. Nothing runs: a command is parsed and
the process exits before its main.

A page's data are the user's (`--config=FILE.py:ARG`'s ARG, `--panel=DIR/…`),
so the config is loaded without its argument, and where the file needs one
its overrides go unchecked. A mention of a script with one flag in prose
(`launch/evaluate.py --baseline`) parses as far as it goes: a missing
required flag is not an error there.
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ('README.md', 'docs/*.md', 'colabs/*.md', 'colabs/*.ipynb')
# `launch/NAME.py` and the flags that follow it (a value ends at a space or a
# backtick; an inline span may wrap, and a shell line may continue with `\`).
COMMAND = re.compile(r'launch/(\w+)\.py((?:\s+--[^\s`"\\]+)+)')
PLACEHOLDER = re.compile(r'[…|<>]')      # `--table=000-4|000-5|…`: a choice, not a command
PARTIAL = 'must have a value other than None'  # a required flag a prose mention leaves out


def _texts(path: pathlib.Path) -> list[str]:
  """The page's text, or a notebook's code and markdown cells (shell lines `!python …`)."""
  if path.suffix != '.ipynb':
    return [path.read_text().replace('\\\n', ' ')]
  cells = json.loads(path.read_text())['cells']
  return [''.join(c['source']).replace('\\\n', ' ') for c in cells]


def page_commands() -> dict[tuple[str, tuple[str, ...]], str]:
  """(script, flags) → the first page that shows it."""
  found = {}
  for pattern in PAGES:
    for path in sorted(ROOT.glob(pattern)):
      for text in _texts(path):
        for match in COMMAND.finditer(text):
          args = tuple(match.group(2).split())
          if not any(PLACEHOLDER.search(a) for a in args):
            found.setdefault((match.group(1), args), str(path.relative_to(ROOT)))
  return found


def _config_file_loads(spec: str) -> bool:
  code = ('import sys; from wsabie_jax.api import cli; cli.load_config(sys.argv[1])')
  return subprocess.run([sys.executable, '-c', code, spec], cwd=ROOT,
                        capture_output=True, timeout=120).returncode == 0


def checked_argv(args: tuple[str, ...], loads) -> list[str]:
  """The flags to parse: the config without its data argument (its overrides
  dropped where the file cannot load without one)."""
  spec = next((a.split('=', 1)[1] for a in args if a.startswith('--config=')), None)
  file_only = spec.split(':', 1)[0] if spec else None
  keep_config = file_only is not None and loads(file_only)
  argv = []
  for a in args:
    if a.startswith('--config=') or a.startswith('--config.'):
      if not keep_config:
        continue
      if a.startswith('--config='):
        a = f'--config={file_only}'
    argv.append(a)
  return argv


def parse_error(script: str, argv: list[str]) -> str | None:
  """The parse's one-line error, or None (a partial mention's missing flag is none)."""
  run = subprocess.run([sys.executable, f'launch/{script}.py', *argv, '--only_check_args'],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
  if run.returncode == 0:
    return None
  last = (run.stderr.strip().splitlines() or ['(no message)'])[-1]
  return None if PARTIAL in last else last


def test_the_pages_show_commands():
  """The reader finds the pages' commands (a broken pattern would check nothing)."""
  found = page_commands()
  scripts = {script for script, _ in found}
  assert {'train', 'benchmark', 'evaluate', 'annotate', 'reproduce'} <= scripts
  assert len(found) >= 40
  assert ('benchmark', ('--suite=panel', '--panel=corel5k,DIR/enron,DIR/medical,DIR/tmc2007,'
                        'DIR/yeast,DIR/scene', '--panel_budgets=10,60')) in found


def test_a_stale_flag_is_caught(tmp_path):
  """The check fails where it should: an unknown flag, a bad value, an unknown
  config field; a prose mention's missing required flag passes."""
  assert 'bogus' in parse_error('benchmark', ['--suite=panel', '--bogus=1'])
  assert 'suite' in parse_error('benchmark', ['--suite=no_such_suite'])
  loads = lambda spec: True
  argv = checked_argv(('--config=configs/wsabie_mulan.py:/data/x', '--config.model.dimm=3'), loads)
  assert argv == ['--config=configs/wsabie_mulan.py', '--config.model.dimm=3']
  assert 'dimm' in parse_error('train', argv)
  assert parse_error('evaluate', ['--baseline']) is None


@pytest.mark.slow
def test_every_page_command_parses():
  loads = {}
  def cached(spec):
    if spec not in loads:
      loads[spec] = _config_file_loads(spec)
    return loads[spec]
  stale = []
  for (script, args), page in sorted(page_commands().items()):
    error = parse_error(script, checked_argv(args, cached))
    if error:
      stale.append(f'{page}: launch/{script}.py {" ".join(args)}\n    {error}')
  assert not stale, 'commands that no longer parse:\n' + '\n'.join(stale)

"""The launch commands that the README, docs/ and the colabs show still parse.

Every flag a page writes must exist and take the value written (absl's own
parse with `--only_check_args`, and `api/cli.parse_flags`'s check of each
`--config.SECTION.FIELD` against the config file's fields), so a renamed or
removed flag cannot leave a page stale. Nothing runs: a command is parsed and
its process exits before its main.

A page's data are the user's (`--config=FILE.py:ARG`'s ARG, `--panel=DIR/…`),
so the config is loaded without its argument, and where the file needs one
its overrides go unchecked. A mention of a script with one flag in prose
(`launch/evaluate.py --baseline`) parses as far as it goes: a missing
required flag is not an error there. A flag written alone (`--force_new`,
`--config.train.max_seconds=120`) must be one some launch script defines, or
a field some config can hold; written with a value, it parses in the one
script that defines it.

Run as a program (`parse_errors`), this file parses the commands it reads on
stdin, each in a fork of one process that imported jax once.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import runpy
import subprocess
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ('README.md', 'docs/*.md', 'colabs/*.md', 'colabs/*.ipynb')
# `launch/NAME.py` and the flags that follow it (a value ends at a space, a
# backtick or a quote; an inline span may wrap, a shell line go on after `\`).
COMMAND = re.compile(r'launch/(\w+)\.py((?:\s+--[^\s`"\\]+)+)')
PLACEHOLDER = re.compile(r'[…|<>]')      # `--table=000-4|000-5|…`: a choice, not a command
PARTIAL = 'must have a value other than None'  # a required flag a prose mention leaves out
LONE = re.compile(r'`(--[^`]+)`')        # an inline span of flags alone, no script before them
# `--num_processes=N`, `=HOST:PORT`: a name that stands for a value, not one
STANDS_FOR = re.compile(r'=[A-Z][A-Z0-9]*(:[A-Z]+)?$')


def _texts(path: pathlib.Path) -> list[str]:
  """The page's text, or a notebook's cells (its shell lines `!python …`)."""
  if path.suffix != '.ipynb':
    return [path.read_text().replace('\\\n', ' ')]
  cells = json.loads(path.read_text())['cells']
  return [''.join(c['source']).replace('\\\n', ' ') for c in cells]


def _page_texts():
  """(page, text) of every page, a notebook's cells one by one."""
  for pattern in PAGES:
    for path in sorted(ROOT.glob(pattern)):
      for text in _texts(path):
        yield str(path.relative_to(ROOT)), text


def page_commands() -> dict[tuple[str, tuple[str, ...]], str]:
  """(script, its flags) → the first page that shows it."""
  found = {}
  for page, text in _page_texts():
    for match in COMMAND.finditer(text):
      args = tuple(match.group(2).split())
      if not any(PLACEHOLDER.search(a) for a in args):
        found.setdefault((match.group(1), args), page)
  return found


def lone_flags() -> dict[str, str]:
  """Each `--flag …` span written without its script → the first page that shows it."""
  found = {}
  for page, text in _page_texts():
    for match in LONE.finditer(text):
      if not PLACEHOLDER.search(match.group(1)):
        found.setdefault(match.group(1), page)
  return found


def config_fields() -> set[str]:
  """'section.field' (and deeper) of every method's config, with every data kind's fields."""
  import dataclasses
  from wsabie_jax import methods
  from wsabie_jax.api.config_view import _flat
  from wsabie_jax.data import settings as data_settings

  fields = {name for method in methods.REGISTRY
            for name, _ in _flat(methods.get(method).base_config().to_dict())}
  return fields | {f'data.{f.name}' for cls in data_settings.CLASSES.values()
                   for f in dataclasses.fields(cls)}


def checked_argv(args: tuple[str, ...], loads) -> list[str]:
  """The flags to parse: the config without its data argument, its overrides
  dropped where the file cannot load without one (`loads(spec)` says)."""
  spec = next((a.split('=', 1)[1] for a in args if a.startswith('--config=')), None)
  file_only = spec.split(':', 1)[0] if spec else None
  keep_config = file_only is not None and loads(file_only)
  argv = []
  for a in args:
    if a.startswith(('--config=', '--config.')):
      if not keep_config:
        continue
      if a.startswith('--config='):
        a = f'--config={file_only}'
    argv.append(a)
  return argv


def _in_child(payload: list, *argv: str) -> list:
  """This file run as a program (`_main`) on `payload`: its answer, one item an entry."""
  run = subprocess.run([sys.executable, __file__, *argv], input=json.dumps(payload), cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr
  return json.loads(run.stdout)


def parse_errors(commands: list[tuple[str, list[str]]]) -> list[str | None]:
  """Each (script, page flags)'s one-line parse error, or None."""
  return _in_child(commands)


def _in_fork(fn) -> tuple[int, str]:
  """fn() in a forked child, which shares this process's imports but defines
  its own flags and loads its own config: (exit status, its last output line)."""
  read, write = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(read)
    os.dup2(write, 1)
    os.dup2(write, 2)
    status = 0
    try:
      fn()
    except SystemExit as stop:  # absl's and cli's exits: a status or a message
      status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
      if isinstance(stop.code, str):
        print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (reported through the pipe)
      traceback.print_exc()
      status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
  os.close(write)
  with os.fdopen(read) as out:
    lines = out.read().strip().splitlines()
  status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
  return status, lines[-1] if lines else ''


def _defined(script: str) -> None:
  """Prints the flags `launch/SCRIPT.py` defines (absl's and jax's among them)."""
  from absl import flags
  runpy.run_path(f'launch/{script}.py', run_name='defining_flags')
  print(json.dumps(sorted(flags.FLAGS)))


def defined_flags() -> dict[str, set[str]]:
  """script → the flags it defines (each script imported in a fork)."""
  scripts = sorted(p.stem for p in (ROOT / 'launch').glob('*.py'))
  return {script: set(names) for script, names in zip(scripts, _in_child(scripts, '--defined'))}


def _parse(script: str, argv: list[str]) -> None:
  sys.argv = [f'launch/{script}.py', *argv, '--only_check_args']
  runpy.run_path(sys.argv[0], run_name='__main__')


def project_imports() -> list[str]:
  """The wsabie_jax modules the launch scripts and config files import at
  their top level (the config files' methods import flax and optax)."""
  import ast
  names = set()
  for path in [*ROOT.glob('launch/*.py'), *ROOT.glob('configs/*.py')]:
    for node in ast.parse(path.read_text()).body:
      if isinstance(node, ast.Import):
        names |= {alias.name for alias in node.names}
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names |= {node.module, *(f'{node.module}.{alias.name}' for alias in node.names)}
  # (`from package import name`: name a submodule or an attribute)
  return sorted(n for n in names if n.split('.')[0] == 'wsabie_jax' and _is_module(n))


def _is_module(name: str) -> bool:
  import importlib.util
  try:
    return importlib.util.find_spec(name) is not None
  except ModuleNotFoundError:
    return False


def _main() -> None:
  # Imported once, before the forks: most of a launch's start (each fork
  # importing its script's modules itself read 0.25-0.5 s a command).
  import importlib
  import jax  # noqa: F401
  for name in project_imports():
    importlib.import_module(name)
  from wsabie_jax.api import cli

  if sys.argv[1:] == ['--defined']:
    defined = []
    for script in json.load(sys.stdin):
      status, last = _in_fork(lambda: _defined(script))
      assert status == 0, f'launch/{script}.py: {last}'
      defined.append(json.loads(last))
    print(json.dumps(defined))
    return
  loads = functools.cache(lambda spec: _in_fork(lambda: cli.load_config(spec))[0] == 0)
  errors = []
  for script, args in json.load(sys.stdin):
    status, last = _in_fork(lambda: _parse(script, checked_argv(tuple(args), loads)))
    errors.append(None if status == 0 or PARTIAL in last else last)
  print(json.dumps(errors))


def test_the_pages_show_commands():
  """The reader finds the pages' commands (a broken pattern would check nothing)."""
  found = page_commands()
  assert {'train', 'benchmark', 'evaluate', 'annotate', 'reproduce'} <= {s for s, _ in found}
  assert len(found) >= 40
  assert any(page == 'README.md' and script == 'benchmark' and '--suite=panel' in args
             for (script, args), page in found.items())


def test_a_stale_flag_is_caught():
  """The check fails where it should (an unknown flag, a bad value, an unknown
  config field) and passes a prose mention's missing required flag."""
  argv = checked_argv(('--config=configs/wsabie_mulan.py:/data/x', '--config.model.dimm=3'),
                      lambda spec: True)
  assert argv == ['--config=configs/wsabie_mulan.py', '--config.model.dimm=3']
  assert checked_argv(('--config=configs/wsabie_folder.py:/data/x', '--config.model.dim=3',
                       '--workdir=w'), lambda spec: False) == ['--workdir=w']
  bogus, suite, field, partial, fine = parse_errors([
      ('benchmark', ['--suite=panel', '--bogus=1']), ('benchmark', ['--suite=no_such_suite']),
      ('train', ['--config=configs/wsabie_mulan.py', '--config.model.dimm=3']),
      ('evaluate', ['--baseline']),
      ('train', ['--config=configs/wsabie_mulan.py:/no/such/dir', '--config.model.dim=64',
                 '--workdir=w'])])
  assert 'bogus' in bogus
  assert 'no_such_suite' in suite
  assert "no field 'dimm'" in field
  assert partial is None
  assert fine is None


def test_every_page_command_parses():
  commands = sorted(page_commands().items())
  errors = parse_errors([(script, list(args)) for (script, args), _ in commands])
  stale = [f'{page}: launch/{script}.py {" ".join(args)}\n    {error}'
           for ((script, args), page), error in zip(commands, errors) if error]
  assert not stale, 'commands that no longer parse:\n' + '\n'.join(stale)


def lone_flag_errors(spans: dict[str, str], defined: dict[str, set[str]],
                     fields: set[str]) -> list[str]:
  """What is wrong with each span of lone flags: a flag no script defines, a
  config field no config holds, or (a flag one script alone defines, written
  with a value) that script's parse error."""
  wrong, to_parse = [], []
  for span, page in sorted(spans.items()):
    tokens = [t for t in span.split() if t.startswith('--')]
    owners = set(defined)
    for token in tokens:
      name = token[2:].split('=', 1)[0]
      if name.startswith('config.'):
        if name[len('config.'):] not in fields:
          wrong.append(f'{page}: `{span}`: no config has a field {name[len("config."):]!r}')
        continue
      owners &= {script for script, names in defined.items() if name in names}
      if not owners:
        wrong.append(f'{page}: `{span}`: no launch script defines --{name}')
        break
    plain = [t for t in tokens if not t.startswith('--config.')]
    if (len(owners) == 1 and any('=' in t for t in plain)
        and not any(STANDS_FOR.search(t) for t in plain)):
      to_parse.append((page, span, owners.pop(), plain))
  errors = parse_errors([(script, argv) for _, _, script, argv in to_parse]) if to_parse else []
  wrong += [f'{page}: `{span}` (launch/{script}.py): {error}'
            for (page, span, script, _), error in zip(to_parse, errors) if error]
  return wrong


def test_a_lone_flag_is_checked():
  """A lone flag no script defines, a field no config holds and a bad value are caught."""
  defined = {'benchmark': {'suite', 'panel_round'}, 'train': {'force_new', 'config'},
             'evaluate': {'config'}}
  fields = {'train.max_seconds'}
  wrong = lone_flag_errors({'--forse_new': 'A.md', '--config.train.max_secs=1': 'B.md',
                            '--suite=no_such_suite': 'C.md', '--force_new': 'D.md',
                            '--config.train.max_seconds=120': 'E.md', '--config': 'F.md',
                            '--panel_round=N': 'G.md'},
                           defined, fields)
  assert len(wrong) == 3, wrong
  by_page = {w.split(':', 1)[0]: w for w in wrong}
  assert '--forse_new' in by_page['A.md']
  assert "'train.max_secs'" in by_page['B.md']
  assert 'no_such_suite' in by_page['C.md']


def test_every_lone_flag_exists():
  spans = lone_flags()
  assert '--force_new' in spans and any(s.startswith('--config.') for s in spans)
  wrong = lone_flag_errors(spans, defined_flags(), config_fields())
  assert not wrong, 'flags the pages name that nothing defines:\n' + '\n'.join(wrong)


if __name__ == '__main__':
  _main()

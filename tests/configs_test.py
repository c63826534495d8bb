"""Every shipped config, with every argument its parse_arg accepts, loads and
passes methods.check (issue 39). The arguments are read off each config's
own parse_arg call, so a new config or a new word is covered without
editing this test; only a free value (a folder) needs an entry in REST."""
import pathlib

import pytest

from tests.identity_test import _libsvm_set
from wsabie_jax import config as config_lib, methods

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / 'configs').glob('*.py'))

# What to give a config's free value (parse_arg's `rest`): a kind of folder.
REST = {'data_dir': 'libsvm or mulan folder', 'manual_dir': 'any folder'}


def _spec(path: pathlib.Path) -> dict:
  """The keywords of the config's parse_arg call (choices, defaults, flags, rest)."""
  module = config_lib.load_module(path)
  seen = {}

  def spy(arg, **spec):
    seen.update(spec)
    return config_lib.parse_arg(arg, **spec)

  module.parse_arg = spy
  try:
    module.get_config()
  except ValueError:
    pass  # a config whose folder is required (wsabie_folder.py): its spec is read first
  assert seen, f'{path.name} does not read its argument with parse_arg'
  return seen


def arguments(path: pathlib.Path, folders: dict) -> list[str]:
  """Each word of each choice group (the others at their default), each flag
  alone, and with a folder where the config takes one."""
  spec = _spec(path)
  choices, defaults = spec.get('choices') or {}, spec.get('defaults') or {}
  base = {g: defaults.get(g, words[0]) for g, words in choices.items()}
  words = [dict(base)]
  words += [dict(base, **{group: w}) for group, ws in choices.items() for w in ws]
  args = {','.join(w.values()) for w in words}
  args |= {','.join([*base.values(), flag]) for flag in spec.get('flags', ())}
  rest = spec.get('rest')
  if rest:
    assert rest in REST, f'{path.name}: give REST a value for its {rest!r}'
    with_folder = set()
    for arg in args:
      for folder in folders[rest](path.name, arg):
        with_folder.add(','.join(filter(None, [arg, folder])))
    args = with_folder if path.name == 'wsabie_folder.py' else args | with_folder
  return sorted(args)


@pytest.fixture(scope='module')
def folders(tmp_path_factory):
  base = tmp_path_factory.mktemp('config_data')
  _libsvm_set(base / 'libsvm')
  (base / 'mulan').mkdir()
  header = ('@relation tiny\n@attribute f0 numeric\n@attribute f1 numeric\n'
            '@attribute a {0,1}\n@attribute b {0,1}\n@data\n')
  for split in ('train', 'test'):
    (base / 'mulan' / f'tiny-{split}.arff').write_text(
        header + ''.join(f'{{0 0.{i + 1},{2 + i % 2} 1}}\n' for i in range(20)))
  (base / 'mulan/tiny.xml').write_text('<labels xmlns="http://mulan.sourceforge.net/labels">'
                                       '<label name="a"/><label name="b"/></labels>')
  libsvm = lambda name, arg: 'libsvm' in arg.split(',') or name == 'wsabie_folder.py'
  return {'data_dir': lambda name, arg: [str(base / ('libsvm' if libsvm(name, arg) else 'mulan'))],
          'manual_dir': lambda name, arg: [str(base)]}


def test_every_config_file_takes_its_argument_through_parse_arg():
  assert len(CONFIGS) >= 11
  for path in CONFIGS:
    _spec(path)


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_with_every_argument_passes_the_checks(path, folders):
  """Every argument, configs/samplers.py:…,paper (paper 003's unconstrained
  norm) among them, is loaded here and passes the config checks."""
  args = arguments(path, folders)
  assert args
  for arg in args:
    config = config_lib.load(f'{path}:{arg}' if arg else path)
    methods.check(config)

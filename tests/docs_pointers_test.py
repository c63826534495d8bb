"""Every file and `module.symbol` the docs and the package's own comments
name exists: a pointer left behind by a rename (`config.validate.PLAN_PACKS`,
`data/proxy.py` for `parts/proxy.py`) fails here instead of misleading a reader."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'wsabie_jax'
# Config sections read like `model.dim`: a module of the same name is not meant.
SECTIONS = {'model', 'loss', 'optim', 'train', 'data', 'eval', 'method', 'sampler'}
PATH = re.compile(r'(?<![\w/.])((?:wsabie_jax|launch|configs|tests|colabs|docs)/[\w/.-]*\w)')
SUBPACKAGES = sorted(p.name for p in (ROOT / 'wsabie_jax').iterdir() if (p / '__init__.py').exists())
# A path within the package, written from its folders: `parts/proxy.py`.
INNER = re.compile(r'(?<![\w/.])((?:' + '|'.join(SUBPACKAGES) + r')/\w+\.py)\b')
SYMBOL = re.compile(r'(?<![\w./])([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\b')
SUFFIXES = {'py', 'md', 'json', 'jsonl', 'txt', 'arff', 'xml', 'ipynb', 'cc', 'so', 'npz', 'csv'}


def _texts():
  for path in [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]:
    yield path, path.read_text()
  for path in [*sorted(PACKAGE.rglob('*.py')), *sorted((ROOT / 'launch').glob('*.py'))]:
    source = path.read_text()
    tree = ast.parse(source)
    docs = [ast.get_docstring(n) or '' for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))]
    comments = [line.split('#', 1)[1] for line in source.splitlines() if '#' in line]
    yield path, '\n'.join(docs + comments)


def _names(module: pathlib.Path) -> set[str]:
  tree = ast.parse(module.read_text())
  names = set()
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      names.update(t.id for t in targets if isinstance(t, ast.Name))
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split('.')[0] for a in node.names)
  for node in ast.walk(tree):  # a class's members: Rules.max_batch, Peers.beat
    if isinstance(node, ast.ClassDef):
      for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
          names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
          names.add(item.target.id)
  return names


def test_every_file_named_exists():
  missing = []
  for path, text in _texts():
    for match in PATH.finditer(text):
      name = match.group(1).rstrip('.')
      if '*' in name or name.endswith('/') or re.search(r'/[A-Z]+(\.py)?$', name):
        continue
      if not (ROOT / name).exists() and not (ROOT / name).with_suffix('.py').exists():
        missing.append(f'{path.relative_to(ROOT)}: {name}')
    for name in INNER.findall(text):
      if not (ROOT / 'wsabie_jax' / name).exists() and not (ROOT / name).exists():
        missing.append(f'{path.relative_to(ROOT)}: {name}')
  assert not missing, '\n'.join(missing)


def test_every_module_symbol_named_exists():
  modules = {}
  for p in PACKAGE.rglob('*.py'):
    if p.name != '__init__.py':
      modules.setdefault(p.stem, []).append(p)
  names = {stem: set().union(*(_names(p) for p in paths)) for stem, paths in modules.items()}
  missing = []
  for path, text in _texts():
    for module, symbol in SYMBOL.findall(text):
      if module in names and module not in SECTIONS and symbol not in SUFFIXES \
          and symbol not in names[module]:
        missing.append(f'{path.relative_to(ROOT)}: {module}.{symbol}')
  assert not missing, '\n'.join(sorted(set(missing)))


def test_every_notebook_cell_has_an_id():
  """nbformat 4.5 cells without an id made every notebook warn
  (MissingIDFieldWarning) when run."""
  import json
  for path in sorted((ROOT / 'colabs').glob('*.ipynb')):
    cells = json.loads(path.read_text())['cells']
    ids = [c.get('id') for c in cells]
    assert all(ids) and len(set(ids)) == len(ids), path.name

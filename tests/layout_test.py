"""The package's imports run one way (docs/DESIGN.md §4): no cycles, and no
package imports one at its own layer or above."""
import ast
import pathlib
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / 'wsabie_jax'

# The packages every method builds on, low to high, and those above the
# methods. A package may import its own modules and any package of a lower
# layer (the users' API below the lab: benchmarks, then the papers' tables,
# which time some rows with the benchmarks' code). Every other package is a
# model (wsabie, skipgram, parts, baselines,
# features, a new method's): layer MODELS, free to import the shared layers
# below it and other models, as long as the models' imports form no cycle
# (test_no_package_cycles). So a new method's package needs no line here.
SHARED = {'config': 0, 'data': 1, 'core': 2, 'training': 3}
MODELS = 4
ABOVE = {'methods': 5, 'api': 6, 'benchmarks': 7, 'reproduce': 8}


def _packages() -> set[str]:
  return {p.name for p in PACKAGE.iterdir() if (p / '__init__.py').exists()}


def _layers() -> dict[str, int]:
  return {**{p: MODELS for p in _packages()}, **SHARED, **ABOVE}


def _modules() -> dict[str, pathlib.Path]:
  out = {}
  for path in PACKAGE.rglob('*.py'):
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
    out[name] = path
  return out


def _imports(name: str, path: pathlib.Path, modules) -> set[str]:
  """The package modules `name` imports (at any depth of its code)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      targets = [f'{node.module}.{a.name}' for a in node.names] + [node.module]
    else:
      continue
    for t in targets:
      while t and t not in modules:
        t = t.rpartition('.')[0]
      if t and t != name and t.startswith('wsabie_jax.'):
        found.add(t)
  return found


def _graph():
  modules = _modules()
  return {name: _imports(name, path, modules) for name, path in modules.items()}


def _package(module: str) -> str | None:
  parts = module.split('.')
  return parts[1] if len(parts) > 1 else None


def test_the_fixed_layers_exist():
  assert set(SHARED) | set(ABOVE) <= _packages()


def test_imports_only_go_down():
  layers, wrong = _layers(), []
  for module, targets in _graph().items():
    src = _package(module)
    if src is None:
      continue
    for target in targets:
      dst = _package(target)
      if dst is None or dst == src:
        continue
      if layers[dst] > layers[src] or (layers[dst] == layers[src] != MODELS):
        wrong.append(f'{module} imports {target} ({src} layer {layers[src]} → '
                     f'{dst} layer {layers[dst]})')
  assert not wrong, '\n'.join(wrong)


def test_no_package_cycles():
  """Models may import each other (parts reuses wsabie's violator search), one way."""
  edges = {}
  for module, targets in _graph().items():
    for target in targets:
      src, dst = _package(module), _package(target)
      if src and dst and src != dst:
        edges.setdefault(src, set()).add(dst)
  done, stack = set(), []

  def visit(package):
    if package in stack:
      pytest.fail('package cycle: ' + ' → '.join(stack[stack.index(package):] + [package]))
    if package in done:
      return
    stack.append(package)
    for nxt in sorted(edges.get(package, ())):
      visit(nxt)
    stack.pop()
    done.add(package)

  for package in sorted(edges):
    visit(package)


def test_no_import_cycles():
  graph = _graph()
  state, path = {}, []

  def visit(node):
    state[node] = 'open'
    path.append(node)
    for nxt in sorted(graph.get(node, ())):
      if nxt.startswith(node + '.'):  # a package's __init__ importing its own modules
        continue
      if state.get(nxt) == 'open':
        pytest.fail('import cycle: ' + ' → '.join(path[path.index(nxt):] + [nxt]))
      if nxt not in state:
        visit(nxt)
    path.pop()
    state[node] = 'done'

  for node in sorted(graph):
    if node not in state:
      visit(node)


def test_the_checks_see_a_violation(monkeypatch):
  """The layer test would fail on data/ importing a method (so it can fail)."""
  graph = _graph()
  graph['wsabie_jax.data.batching'] = graph['wsabie_jax.data.batching'] | {'wsabie_jax.methods'}
  monkeypatch.setattr(sys.modules[__name__], '_graph', lambda: graph)
  with pytest.raises(AssertionError, match='data layer 1'):
    test_imports_only_go_down()
  graph['wsabie_jax.wsabie.warp'] = graph['wsabie_jax.wsabie.warp'] | {'wsabie_jax.parts.step'}
  with pytest.raises(pytest.fail.Exception, match='package cycle'):
    test_no_package_cycles()


# The training loop reads on a page: no function of training/ longer than
# this (docstring included), so `loop._train` stays Alg. 1's outer loop.
LONGEST_IN_TRAINING = 40


def test_no_function_in_training_is_longer_than_a_page():
  long = [f'{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)'
          for path in sorted((PACKAGE / 'training').glob('*.py'))
          for node in ast.walk(ast.parse(path.read_text()))
          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
          and node.end_lineno - node.lineno + 1 > LONGEST_IN_TRAINING]
  assert not long, long

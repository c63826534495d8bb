"""A mutation pass over the package: one-token changes, each run against the
fast tier's tests that import the changed module within two imports, then,
if none fails, every test that imports it at all; a mutant no test fails is a survivor, to be killed by a test or
listed as equivalent (with the reason) in the closing note.

  python -m tests.mutation_pass --packages training,data,wsabie --sample 60 --seed 0

Operators (tokenize, so strings and comments are never touched): comparison
flips (< ↔ <=, > ↔ >=, == ↔ !=), integer literals off by one, + ↔ − between
operands, min ↔ max (and jnp's minimum ↔ maximum), .add ↔ .set, True ↔
False, and ↔ or. Lines that only build a message (raise, log, warn) are left
out: a test pins their words elsewhere, and they change no result. Each
mutant runs with -x under a timeout; the file is restored whatever happens.
Prints a line a mutant and the counts; --out writes them as JSON.
"""
from __future__ import annotations

import argparse
import ast
import functools
import io
import json
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
SWAPS = {'<': '<=', '<=': '<', '>': '>=', '>=': '>', '==': '!=', '!=': '==', '+': '-', '-': '+',
         'min': 'max', 'max': 'min', 'minimum': 'maximum', 'maximum': 'minimum', 'add': 'set',
         'set': 'add', 'True': 'False', 'False': 'True', 'and': 'or', 'or': 'and'}
MESSAGE_LINE = re.compile(r'^\s*(raise |log\.|logging\.|warnings\.warn|print\(|assert )')
OPERAND_END = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING}


def mutants(path: pathlib.Path) -> list[dict]:
  """Every one-token change of `path`: {'file', 'line', 'col', 'old', 'new'}."""
  source = path.read_text()
  lines = source.splitlines()
  tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
  out = []
  for i, tok in enumerate(tokens):
    (row, col), text = tok.start, tok.string
    if row > len(lines) or MESSAGE_LINE.match(lines[row - 1]):
      continue
    prev = tokens[i - 1] if i else None
    new = None
    if tok.type == tokenize.OP and text in ('<', '<=', '>', '>=', '==', '!='):
      new = SWAPS[text]
    elif tok.type == tokenize.OP and text in ('+', '-') and prev is not None and (
        prev.type in OPERAND_END or prev.string in (')', ']')):
      new = SWAPS[text]  # binary only: a sign is left alone
    elif tok.type == tokenize.NUMBER and re.fullmatch(r'\d+', text):
      new = str(int(text) + 1)
    elif tok.type == tokenize.NAME and text in ('min', 'max', 'minimum', 'maximum', 'True',
                                                 'False', 'and', 'or'):
      new = SWAPS[text]
    elif tok.type == tokenize.NAME and text in ('add', 'set') and prev is not None \
        and prev.string == '.' and tokens[i + 1].string == '(':
      new = SWAPS[text]
    if new is not None:
      out.append({'file': str(path.relative_to(ROOT)), 'line': row, 'col': col, 'old': text,
                  'new': new})
  return out


def _imports(path: pathlib.Path) -> set[str]:
  """The wsabie_jax modules a file imports (module-level and inside functions)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('wsabie_jax'):
      found.add(node.module)
      found.update(f'{node.module}.{a.name}' for a in node.names)
    elif isinstance(node, ast.Import):
      found.update(a.name for a in node.names if a.name.startswith('wsabie_jax'))
  return found


def _module_of(path: pathlib.Path) -> str:
  return '.'.join(path.relative_to(ROOT).with_suffix('').parts).removesuffix('.__init__')


@functools.cache
def _graph() -> dict[str, set[str]]:
  """The package's modules and the package modules each imports (read once:
  a mutant never changes an import)."""
  graph = {_module_of(p): _imports(p) for p in (ROOT / 'wsabie_jax').rglob('*.py')}
  return {m: {i for i in deps if i in graph} for m, deps in graph.items()}


def tests_importing(module: str, hops: int | None = None) -> list[str]:
  """Test files whose import closure (through the package's own modules) holds
  `module`, within `hops` imports of the test (None: any): the nearest first
  (-x stops at the first failure)."""
  graph = _graph()
  found = []
  for test in sorted((ROOT / 'tests').glob('*_test.py')):
    depth, frontier, seen = 0, {i for i in _imports(test) if i in graph}, set()
    while frontier and (hops is None or depth < hops):
      if module in frontier:
        found.append((depth, str(test.relative_to(ROOT))))
        break
      seen |= frontier
      frontier = {d for m in frontier for d in graph[m] | {p for p in graph if m.startswith(p + '.')}
                  } - seen
      depth += 1
  return [t for _, t in sorted(found)]


def run(mutant: dict, tests: list[str], timeout: float, workers: int = 1) -> str:
  path = ROOT / mutant['file']
  original = path.read_text()
  lines = original.splitlines(keepends=True)
  line = lines[mutant['line'] - 1]
  c = mutant['col']
  assert line[c:c + len(mutant['old'])] == mutant['old'], mutant
  lines[mutant['line'] - 1] = line[:c] + mutant['new'] + line[c + len(mutant['old']):]
  try:
    path.write_text(''.join(lines))
    cmd = [sys.executable, '-m', 'pytest', '-q', '-x', '-m', 'not slow', '-p', 'no:cacheprovider',
           *(['-n', str(workers)] if workers > 1 else []), *tests]
    try:
      out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
      return 'killed (timeout)'
    if out.returncode == 0:
      return 'survived'
    if out.returncode == 5:
      return 'survived (no test ran)'
    return 'killed'
  finally:
    path.write_text(original)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--packages', default='training,data,wsabie')
  parser.add_argument('--sample', type=int, default=60, help='mutants drawn (0: all)')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--timeout', type=float, default=600)
  parser.add_argument('--out', default='')
  parser.add_argument('--workers', type=int, default=1, help='pytest-xdist workers a mutant')
  args = parser.parse_args()
  # SIGTERM (a timeout, a scheduler) must still put the mutated file back.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
  every = [m for pkg in args.packages.split(',')
           for p in sorted((ROOT / 'wsabie_jax' / pkg).glob('*.py')) for m in mutants(p)]
  chosen = every if not args.sample else random.Random(args.seed).sample(
      every, min(args.sample, len(every)))
  print(f'{len(every)} mutants in {args.packages}; running {len(chosen)}', flush=True)
  results = []
  for m in chosen:
    module = _module_of(ROOT / m['file'])
    tests = tests_importing(module)
    start = time.monotonic()
    near = tests_importing(module, hops=2)
    outcome = run(m, near, args.timeout, args.workers) if near else 'survived'
    if outcome.startswith('survived') and tests:  # the near tests missed it: every one that could
      outcome = run(m, tests, args.timeout, args.workers)
    elif not tests:
      outcome = 'survived (no test imports it)'
    results.append({**m, 'outcome': outcome, 'tests': len(tests),
                    'seconds': round(time.monotonic() - start, 1)})
    print(f"{outcome:28s} {m['file']}:{m['line']}:{m['col']} {m['old']} -> {m['new']} "
          f"({len(tests)} test files, {results[-1]['seconds']} s)", flush=True)
  killed = sum(r['outcome'].startswith('killed') for r in results)
  print(f'killed {killed} of {len(results)} ({killed / max(len(results), 1):.0%})')
  if args.out:
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
  main()

"""Tests that share a costly module fixture share a worker.

`pytest -n auto --dist loadgroup` (pyproject.toml) sends the tests marked
xdist_group('NAME') to one worker; a module fixture read by tests on two
workers is made on both (synonyms_test's two trainings, 33 s each;
multihost_test's two-process run). Imported by tests/conftest.py.
"""
import pytest


def pytest_itemcollected(item):
  """Marks a test that reads a module-scoped fixture with its module's group
  (unless it has a group already), as it is collected: xdist reads the marks
  in its own pytest_collection_modifyitems."""
  defs = getattr(item, '_fixtureinfo', None)
  if defs is None or item.get_closest_marker('xdist_group'):
    return
  if any(d and d[-1].scope == 'module' for d in defs.name2fixturedefs.values()):
    item.add_marker(pytest.mark.xdist_group(item.module.__name__))

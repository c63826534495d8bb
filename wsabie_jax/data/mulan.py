"""Reader for the Mulan multi-label format: an ARFF file (sparse or dense) plus
an XML file naming the label attributes (flat, or nested for a hierarchy)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from wsabie_jax.data.dataset import (DataError, SparseDataset, from_lists, is_int, parse_number,
                                     text_lines)

_ATTRIBUTE = re.compile(r"@attribute\s+('(?:[^'\\]|\\.)*'|\"[^\"]*\"|\S+)\s+(.+)$", re.I)


def read_label_xml(path) -> tuple[list[str], dict[str, str]]:
  """Label names in document order, and each nested label's parent label name."""
  try:
    root = ET.parse(path).getroot()
  except (ET.ParseError, OSError) as e:
    raise DataError(path, getattr(e, 'position', (None,))[0], f'cannot read label XML: {e}') from e
  names, parent = [], {}

  def walk(node, parent_name):
    for child in node:
      if child.tag.split('}')[-1] != 'label':
        continue
      name = child.get('name')
      if not name:
        raise DataError(path, None, 'a <label> element has no name attribute')
      names.append(name)
      if parent_name is not None:
        parent[name] = parent_name
      walk(child, name)

  walk(root, None)
  if not names:
    raise DataError(path, None, 'no <label name=...> elements found')
  if len(set(names)) != len(names):
    raise DataError(path, None, 'label names are repeated')
  return names, parent


def _unquote(name: str) -> str:
  if len(name) >= 2 and name[0] == name[-1] and name[0] in '\'"':
    return name[1:-1].replace("\\'", "'")
  return name


def read_arff(arff_path, labels_path, skip_empty: bool = True) -> SparseDataset:
  """Reads a Mulan data set; features are the non-label attributes, in order."""
  label_names, label_parent = read_label_xml(labels_path)
  attributes: list[str] = []
  features, labels = [], []
  skipped = 0
  in_data = False
  for line_no, raw in text_lines(arff_path):  # (gzipped or not; a BOM is dropped)
    line = raw.strip()
    if not line or line.startswith('%'):
      continue
    if not in_data:
      lower = line.lower()
      if lower.startswith('@attribute'):
        m = _ATTRIBUTE.match(line)
        if not m:
          raise DataError(arff_path, line_no, f'malformed @attribute line: {line[:80]!r}')
        attributes.append(_unquote(m.group(1)))
      elif lower.startswith('@data'):
        in_data = True
        column_of = {name: i for i, name in enumerate(attributes)}
        missing = [n for n in label_names if n not in column_of]
        if missing:
          raise DataError(arff_path, line_no, f'labels from {labels_path} missing as attributes: {missing[:5]}')
        label_of_column = np.full(len(attributes), -1, np.int64)
        label_of_column[[column_of[n] for n in label_names]] = np.arange(len(label_names))
        feature_of_column = np.cumsum(label_of_column < 0) - 1
        num_features = int((label_of_column < 0).sum())
      elif not lower.startswith('@relation'):
        raise DataError(arff_path, line_no, f'unexpected header line: {line[:80]!r}')
      continue
    columns, values = _parse_row(line, len(attributes), arff_path, line_no)
    is_label = label_of_column[columns] >= 0
    lab_vals = values[is_label]
    if np.any((lab_vals != 0) & (lab_vals != 1)):
      raise DataError(arff_path, line_no, 'label attributes must be 0 or 1')
    row_labels = label_of_column[columns[is_label][lab_vals == 1]]
    if len(row_labels) == 0 and skip_empty:
      skipped += 1
      continue
    keep = ~is_label & (values != 0)
    features.append((feature_of_column[columns[keep]], values[keep]))
    labels.append(row_labels)
  if not attributes or not in_data:
    raise DataError(arff_path, None, 'no @attribute/@data sections found')
  parents = None
  if label_parent:  # a hierarchical XML: siblings share their parent label
    index = {n: i for i, n in enumerate(label_names)}
    parents = np.array([[index[label_parent[n]]] if n in label_parent else [-1]
                        for n in label_names], np.int32)
  return from_lists(features, labels, num_features, label_names,
                    label_parents=parents, skipped_empty=skipped)


def _parse_row(line: str, num_columns: int, path, line_no: int):
  if line.startswith('{'):
    if not line.endswith('}'):
      raise DataError(path, line_no, 'sparse row does not end with "}"')
    body = line[1:-1].strip()
    columns, values = [], []
    for item in filter(None, (t.strip() for t in body.split(','))):
      parts = item.split()
      if len(parts) != 2 or not is_int(parts[0]):
        raise DataError(path, line_no, f'sparse entry {item!r} is not "index value"')
      col = int(parts[0])
      if col >= num_columns:
        raise DataError(path, line_no, f'attribute index {col} out of range (only {num_columns} attributes)')
      columns.append(col)
      values.append(parse_number(parts[1], path, line_no, f'attribute {col}'))
    return np.asarray(columns, np.int64), np.asarray(values, np.float32)
  tokens = [t.strip() for t in line.split(',')]
  if len(tokens) != num_columns:
    raise DataError(path, line_no, f'dense row has {len(tokens)} values, expected {num_columns}')
  values = [parse_number(t, path, line_no, f'attribute {i}') for i, t in enumerate(tokens)]
  return np.arange(num_columns), np.asarray(values, np.float32)

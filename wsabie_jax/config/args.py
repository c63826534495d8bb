"""The one parser of a config file's `:arg` string (and of SECTION.KEY=VALUE
overrides, `parse_overrides`).

`--config=configs/FILE.py:ARG` hands ARG to `get_config`. Every config reads
it the same way: comma-separated words, each either a flag from a fixed set
(`small`, `zeroshot`) or one choice from a named group (a table row, a data
set), optionally followed by a free value (a folder). Unknown words are an
error that lists what the config accepts.
"""
from __future__ import annotations

import ast
from typing import Sequence


def parse_arg(arg: str | None, *, choices: dict[str, Sequence[str]] | None = None,
              defaults: dict[str, str] | None = None, flags: Sequence[str] = (),
              rest: str | None = None, where: str = 'config') -> dict:
  """Reads "word,word,…" into {group: choice, flag: bool, rest: str}.

  `choices` maps a group name to its allowed words (each word belongs to one
  group; a group missing from the argument takes its entry in `defaults`, or
  is an error); `flags` are optional words; `rest`, when named, takes one
  word that is none of these (a path).
  """
  choices, defaults = dict(choices or {}), dict(defaults or {})
  out: dict = {flag: False for flag in flags}
  if rest:
    out[rest] = ''
  owner = {w: group for group, words in choices.items() for w in words}
  for word in [w.strip() for w in (arg or '').split(',') if w.strip()]:
    if word in owner:
      if owner[word] in out:
        raise ValueError(f'{where}: argument {arg!r} names two {owner[word]}s')
      out[owner[word]] = word
    elif word in flags:
      out[word] = True
    elif rest and not out[rest]:
      out[rest] = word
    else:
      expected = [f'{g}: {"|".join(ws)}' for g, ws in choices.items()] + list(flags)
      if rest:
        expected.append(f'a {rest}')
      raise ValueError(f'{where}: unknown word {word!r} in argument {arg!r}; expected '
                       + ', '.join(expected))
  for group in choices:
    if group not in out:
      if group not in defaults:
        raise ValueError(f'{where}: argument {arg!r} names no {group} ({"|".join(choices[group])})')
      out[group] = defaults[group]
  return out


def parse_overrides(items) -> dict:
  """['train.select_metric=p@1', 'model.dim=64'] → {'train.select_metric': 'p@1',
  'model.dim': 64}: a value that reads as a Python literal or a float ('inf') is
  one, else a string."""
  out = {}
  for item in items:
    path, sep, text = item.partition('=')
    if not sep or path.count('.') != 1:
      raise ValueError(f'override {item!r}: expected SECTION.KEY=VALUE')
    out[path] = _value(text)
  return out


def _value(text: str):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    pass
  try:
    return float(text)  # 'inf', 'nan'
  except ValueError:
    return text

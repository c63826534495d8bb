"""What the methods that rank labels for images share (WSABIE, skip-gram;
objects-and-parts annotation too): data loading, exact ranking metrics over
all labels with the frequency baseline, the vocabulary a workdir keeps."""
from __future__ import annotations


import ml_collections
import numpy as np

from wsabie_jax.core import evaluation
from wsabie_jax.data import SparseDataset, batching, dataset
from wsabie_jax import data as data_lib
from wsabie_jax.training.method import Method


def load_splits(config: ml_collections.ConfigDict):
  """(train, valid, test) of config.data."""
  return data_lib.load_splits(config.data)


def eval_kwargs(config, data) -> dict:
  return dict(score=config.model.score, ks=tuple(config.eval.ks), batch_size=config.eval.batch_size,
              chunk=config.eval.label_chunk, label_parents=data.label_parents, f1_k=config.eval.f1_k)


def vocabulary(ds) -> dict:
  """What vocabulary.json keeps of the training set: its labels, its feature
  count, and data.standardize's statistics where they shifted its features
  (annotate.py applies them to new examples)."""
  shift = getattr(ds, 'standardized', None)  # (streamed shards have none)
  return {'label_names': ds.label_names, 'num_features': ds.num_features,
          'label_parents': None if ds.label_parents is None else ds.label_parents.tolist(),
          'num_seen_labels': ds.num_seen_labels,
          **({'standardized': shift.to_json()} if shift is not None else {})}


def seen_labels_only(ds: SparseDataset, train: SparseDataset) -> SparseDataset:
  """`ds` ranked over the labels training saw (all of them without a zero-shot hold-out)."""
  if train.num_seen_labels is None:
    return ds
  return dataset.select_labels(ds, np.arange(train.num_seen_labels))


def num_seen(ds: SparseDataset) -> int:
  return ds.num_labels if ds.num_seen_labels is None else ds.num_seen_labels


def evaluate_split(config, train: SparseDataset, split: SparseDataset, scorer,
                   baseline: bool = True) -> dict:
  """Exact ranking metrics of a split over the labels training saw, and the
  frequency baseline's as freq_*."""
  seen = seen_labels_only(split, train)
  padded = batching.pad_images(seen)
  kw = dict(eval_kwargs(config, train), label_parents=seen.label_parents)
  result = evaluation.evaluate_ranking(*scorer, padded, **kw)
  if baseline:
    base = evaluation.evaluate_frequency_baseline(
        train.label_frequencies()[:seen.num_labels], padded, **kw)
    result.update({f'freq_{k}': v for k, v in base.items() if k != 'num_images'})
  return result


def ranking_method(config, splits, scorer, on_validation, finish, tested=None, **fields) -> Method:
  """validate/test for methods that rank labels for images (WSABIE, skip-gram):
  exact metrics over all labels (seen labels only under a zero-shot hold-out),
  the frequency baseline, then the method's own test extras (`finish`).
  `tested(state, best, workdir) -> (scorer, extras)`: the model tested, made
  from the tested state and the best on validation (default: the state's own
  scorer)."""
  train, valid, test = splits
  ev = eval_kwargs(config, train)
  padded_valid = batching.pad_images(valid)
  baseline = {}  # the frequency baseline's selection metric on the validation subset, once
  freq_metric = f'freq_{config.train.select_metric}'

  def validate(state):
    if valid.num_images == 0:
      return None
    if not baseline:
      baseline.update({f'freq_{k}': v for k, v in evaluation.evaluate_frequency_baseline(
          train.label_frequencies()[:num_seen(train)], padded_valid,
          limit=config.train.eval_subset, **ev).items() if f'freq_{k}' == freq_metric})
    return {**evaluation.evaluate_ranking(*scorer(state), padded_valid,
                                          limit=config.train.eval_subset, **ev),
            **on_validation(state), **baseline}

  def test_fn(state, workdir, best=None) -> dict:
    chosen, extras = (tested(state, state if best is None else best, workdir) if tested
                      else (scorer(state), {}))
    result = evaluate_split(config, train, test, chosen)
    result.update(extras)
    result.update(finish(state, test, ev, workdir))
    result['skipped_empty'] = train.skipped_empty + test.skipped_empty
    return result

  ks = config.eval.ks
  selectable = {f'{m}@{k}' for m in ('p', 'r', 'psib') for k in ks} | {'map', 'auc'}
  description = (f'{train.num_images} train / {valid.num_images} valid / {test.num_images} test '
                 f'images, {train.num_labels} labels, {train.num_features} features; '
                 f'{train.skipped_empty} examples skipped for empty label sets')
  return Method(validate=validate, test=test_fn, select_metrics=frozenset(selectable),
                description=description, config=config, **fields)


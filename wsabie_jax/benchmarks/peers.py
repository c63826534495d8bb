"""The tools a user would pick instead, on the same files (launch/benchmark.py
--suite=peers, and beside ours in --suite=panel).

Each peer trains on the training split's raw feature values and on their
tf-idf weighting (`tfidf`: idf from the training split, rows l2-normalised,
what the tree libraries are usually fed), with each library's documented
multi-label settings and `threads` threads, to completion; it is timed for
training only and scored by its top 5 labels on the test split (p@1, p@3,
p@5 over the test images that have labels, as ours are). With `seeds` > 1
each row is the mean of runs at seeds 0 … seeds − 1, as ours' cells are
(omikuji takes no seed: each of its runs is a draw of its own): the best of
twelve single runs is a maximum of noisy figures, above what the library
scores on average (docs/RESULTS.md "Against the extreme-classification
libraries").

  napkinxc_plt     napkinXC's probabilistic label tree (PLT, hierarchical k-means)
  napkinxc_br      napkinXC's one-vs-rest binary relevance (BR)
  omikuji_parabel  omikuji's Parabel (balanced 2-means trees, 3 of them)
  omikuji_bonsai   omikuji's Bonsai (unbalanced 100-means, depth 3)
  fasttext_ova     fastText's one-vs-all (`-loss ova`); a feature is a word,
                   repeated its count times (raw counts only: it reads text)
  sklearn_ovr      scikit-learn's one-vs-rest logistic regression (liblinear)

None is a dependency: `pip install -e '.[peers]'` installs them, and a peer
whose library is missing is skipped with a line saying so.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import pathlib
import sys
import tempfile
import time
from typing import Callable

import numpy as np

from wsabie_jax.data import dataset
from wsabie_jax.data.dataset import SparseDataset

TOP = 5
KS = (1, 3, 5)


@dataclasses.dataclass(frozen=True)
class Peer:
  name: str
  module: str  # the library it imports
  # (train, test, threads, a scratch folder, seed) -> a call returning the test
  # images' top-TOP label ids, n×TOP
  top_labels: Callable[[SparseDataset, SparseDataset, int, pathlib.Path, int],
                       Callable[[], np.ndarray]]
  tfidf: bool = True  # it also runs on the tf-idf weighting

  def available(self) -> bool:
    return importlib.util.find_spec(self.module) is not None


def csr(ds: SparseDataset, num_features: int | None = None):
  """The features as a scipy CSR matrix (num_features columns: the training split's)."""
  import scipy.sparse as sp
  d = num_features or ds.num_features
  keep = ds.feat_idx < d  # (a test feature training never saw carries no weight)
  rows = np.repeat(np.arange(ds.num_images), np.diff(ds.feat_indptr))
  return sp.csr_matrix((ds.feat_val[keep], (rows[keep], ds.feat_idx[keep])),
                       shape=(ds.num_images, d), dtype=np.float32)


def tfidf(train: SparseDataset, *splits: SparseDataset) -> list[SparseDataset]:
  """Each split's values times the training split's idf, then its rows
  l2-normalised (dataset.idf_weighted)."""
  idf_d = dataset.idf(train)
  return [dataset.idf_weighted(ds, idf_d) for ds in (train,) + splits]


def label_lists(ds: SparseDataset) -> list[list[int]]:
  return [ds.labels(i).tolist() for i in range(ds.num_images)]


def _padded(lists, n: int) -> np.ndarray:
  """Ragged top-label lists as n×TOP, short ones padded with −1 (never a label)."""
  out = np.full((n, TOP), -1, np.int64)
  for i, labels in enumerate(lists):
    labels = list(labels)[:TOP]
    out[i, :len(labels)] = labels
  return out


def _napkinxc(kind: str):
  def top_labels(train, test, threads, scratch, seed):
    from napkinxc import models
    model = getattr(models, kind)(str(scratch / f'napkinxc_{kind}'), threads=threads, seed=seed)
    model.fit(csr(train), label_lists(train))
    return lambda: _padded(model.predict(csr(test, train.num_features), top_k=TOP),
                           test.num_images)
  return top_labels


def _xmc_file(ds: SparseDataset, path: pathlib.Path) -> pathlib.Path:
  """The Extreme Classification Repository's format omikuji reads."""
  with open(path, 'w') as f:
    f.write(f'{ds.num_images} {ds.num_features} {ds.num_labels}\n')
    for i in range(ds.num_images):
      idx, val = ds.features(i)
      # (an example without features is its labels alone: omikuji refuses a trailing space)
      f.write(' '.join([','.join(map(str, ds.labels(i)))]
                       + [f'{j}:{v:.6g}' for j, v in zip(idx, val)]) + '\n')
  return path


def _omikuji(bonsai: bool):
  def top_labels(train, test, threads, scratch, seed):  # (omikuji takes no seed)
    import omikuji
    hp = omikuji.Model.default_hyper_param()
    if bonsai:  # omikuji's README: --cluster.unbalanced --cluster.k 100 --max_depth 3
      hp.cluster_balanced, hp.cluster_k, hp.max_depth = False, 100, 3
    model = omikuji.Model.train_on_data(str(_xmc_file(train, scratch / 'train.xmc')), hp,
                                        n_threads=threads)

    def predict():
      d = train.num_features
      return _padded(([label for label, _ in model.predict(
          [(int(j), float(v)) for j, v in zip(*test.features(i)) if j < d], top_k=TOP)]
                      for i in range(test.num_images)), test.num_images)
    return predict
  return top_labels


def _words(ds: SparseDataset, i: int) -> str:
  idx, val = ds.features(i)
  return ' '.join(' '.join([f'f{j}'] * max(1, int(round(v)))) for j, v in zip(idx, val))


FASTTEXT_RATES = (0.5, 0.1)


def _fasttext(train, test, threads, scratch, seed):
  import fasttext
  path = scratch / 'train.ft'
  with open(path, 'w') as f:
    for i in range(train.num_images):
      f.write(' '.join(f'__label__{y}' for y in train.labels(i)) + ' ' + _words(train, i) + '\n')
  # fastText's multi-label tutorial: one-vs-all loss, lr 0.5, 25 epochs. Where
  # that rate diverges (its 'Encountered NaN': Delicious' raw counts, a few
  # hundred words an example), a fifth of it, as a user would try next; the
  # diverged try's seconds count in the row's.
  for lr in FASTTEXT_RATES:
    try:
      model = fasttext.train_supervised(str(path), loss='ova', lr=lr, epoch=25, thread=threads,
                                        verbose=0, seed=seed)
      break
    except RuntimeError as error:
      if 'NaN' not in str(error) or lr == FASTTEXT_RATES[-1]:
        raise

  def predict():
    # (A list of lines: its multi-line path returns plain lists, which numpy 2 takes.)
    names, _ = model.predict([_words(test, i) for i in range(test.num_images)], k=TOP)
    return _padded(([int(name[len('__label__'):]) for name in row] for row in names),
                   test.num_images)
  return predict


def _sklearn(train, test, threads, scratch, seed):
  from sklearn.linear_model import LogisticRegression
  from sklearn.multiclass import OneVsRestClassifier
  from sklearn.preprocessing import MultiLabelBinarizer
  import warnings
  Y = MultiLabelBinarizer(classes=range(train.num_labels)).fit_transform(label_lists(train))
  model = OneVsRestClassifier(LogisticRegression(solver='liblinear', random_state=seed),
                              n_jobs=threads)
  with warnings.catch_warnings():  # (a label no training image has: a constant classifier)
    warnings.simplefilter('ignore')
    model.fit(csr(train), Y)

  def predict():
    scores = model.decision_function(csr(test, train.num_features))
    # A label no training image has gets a constant classifier scoring 0,
    # above every fitted one's negative margin: it is never predicted.
    scores[:, Y.sum(0) == 0] = -np.inf
    return np.argsort(-scores, axis=1, kind='stable')[:, :TOP]
  return predict


PEERS = {p.name: p for p in (
    Peer('napkinxc_plt', 'napkinxc', _napkinxc('PLT')),
    Peer('napkinxc_br', 'napkinxc', _napkinxc('BR')),
    Peer('omikuji_parabel', 'omikuji', _omikuji(bonsai=False)),
    Peer('omikuji_bonsai', 'omikuji', _omikuji(bonsai=True)),
    Peer('fasttext_ova', 'fasttext', _fasttext, tfidf=False),
    Peer('sklearn_ovr', 'sklearn', _sklearn))}


def precision_at(top_NxT: np.ndarray, test: SparseDataset, ks=KS) -> dict:
  """p@k of top-label lists over the test images with labels."""
  hits = np.zeros_like(top_NxT, dtype=bool)
  for i in range(test.num_images):
    hits[i] = np.isin(top_NxT[i], test.labels(i))
  has = np.diff(test.label_indptr) > 0
  return {f'p@{k}': float(hits[has, :k].sum(1).mean() / k) for k in ks}


@contextlib.contextmanager
def _quiet_native_output():
  """The process's stdout and stderr (file descriptors 1 and 2) sent to
  /dev/null: omikuji's trainer draws a progress bar and logs from native code."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = [os.dup(fd) for fd in (1, 2)]
  with open(os.devnull, 'w') as null:
    for fd in (1, 2):
      os.dup2(null.fileno(), fd)
  try:
    yield
  finally:
    for fd, copy in zip((1, 2), saved):
      os.dup2(copy, fd)
      os.close(copy)


def run(train: SparseDataset, test: SparseDataset, threads: int = 2, names=None,
        weightings=('raw', 'tfidf'), log=print, seeds: int = 1) -> list[dict]:
  """Every available peer of `names` (all by default) at each weighting: rows of
  {'peer', 'weighting', 'train_seconds', 'p@1', 'p@3', 'p@5'}, each the mean
  over runs at seeds 0 … seeds − 1 (with 'p@1_sem', the standard error of that
  mean, where seeds > 1); a missing library is skipped with a line."""
  rows = []
  weighted = dict(zip(('raw', 'tfidf'), ([train, test], tfidf(train, test))))
  for name in names or PEERS:
    peer = PEERS[name]
    if not peer.available():
      log(f'  {name}: skipped ({peer.module} is not installed: pip install -e ".[peers]")')
      continue
    for weighting in weightings:
      if weighting == 'tfidf' and not peer.tfidf:
        continue
      try:
        runs = [_trained(peer, *weighted[weighting], threads, seed) for seed in range(seeds)]
      except RuntimeError as error:  # (fastText's 'Encountered NaN': its rate diverged)
        log(f'  {name:<16} {weighting:<6} failed: {error}')
        continue
      row = {'peer': name, 'weighting': weighting,
             **{key: float(np.mean([r[key] for r in runs])) for key in runs[0]}}
      if seeds > 1:
        row['p@1_sem'] = float(np.std([r['p@1'] for r in runs], ddof=1) / np.sqrt(seeds))
      rows.append(row)
      spread, over = ((f' ± {row["p@1_sem"]:.4f}', f' (mean of {seeds} seeds)') if seeds > 1
                      else ('', ''))
      log(f'  {name:<16} {weighting:<6} p@1 {row["p@1"]:.4f}{spread}  p@3 {row["p@3"]:.4f}  '
          f'p@5 {row["p@5"]:.4f}  trained in {row["train_seconds"]:.1f} s{over}')
  return rows


def _trained(peer: Peer, train: SparseDataset, test: SparseDataset, threads: int,
             seed: int) -> dict:
  """One run of a peer: {'train_seconds', 'p@1', 'p@3', 'p@5'}."""
  with tempfile.TemporaryDirectory() as scratch, _quiet_native_output():
    start = time.perf_counter()
    predict = peer.top_labels(train, test, threads, pathlib.Path(scratch), seed)
    seconds = time.perf_counter() - start
    top = predict()
  return {'train_seconds': seconds, **precision_at(top, test)}


def best(rows: list[dict]) -> dict | None:
  """The row of the highest test p@1 (the bar a cell of ours is read against)."""
  return max(rows, key=lambda r: r['p@1']) if rows else None


def verdict(ours_p1: float, peer_p1: float, num_test: int) -> str:
  """'ahead' where ours' p@1 is at or above the peer's; 'level' where it is
  within one standard error of a p@1 on this test file, √(p(1−p)/n), below
  it; else 'behind'."""
  if ours_p1 >= peer_p1:
    return 'ahead'
  return 'level' if peer_p1 - ours_p1 <= np.sqrt(peer_p1 * (1 - peer_p1) / num_test) else 'behind'


def table(rows: list[dict], within: float) -> str:
  """Markdown: per set and budget of the panel's rows (benchmarks/panel.py),
  ours' p@1 and p@5 beside the best peer's, its name, weighting and training
  seconds, the verdict (`verdict`), and the seconds of steps ours takes to
  reach that p@1 (trained towards it for max(`within`, twice the peer's)),
  'within' or 'over' the peer's time: under 10 s both to the hundredth, as
  the small sets' peers train in tenths of a second."""
  sem = lambda r: f' ± {r["p@1_sem"]:.3f}' if r.get('p@1_sem') is not None else ''
  lines = ['| set | budget | ours p@1 | ours p@5 | best peer | its p@1 / p@3 / p@5 | its train s '
           '| ours is | ours reaches its p@1 in |', '|---|---|---|---|---|---|---|---|---|']
  for r in rows:
    if r['system'] != 'wsabie_jax' or 'best_peer' not in r:
      continue
    best, reach = r['best_peer'], r['seconds_to_best_peer']
    lines.append(
        f'| {r["set"]} | {r["budget"]:.0f} s | {r["p@1"]:.3f}{sem(r)} | {r["p@5"]:.3f} | {best["peer"]} '
        f'({best["weighting"]}) | {best["p@1"]:.3f}{sem(best)} / {best["p@3"]:.3f} / {best["p@5"]:.3f} | '
        f'{_seconds(best["train_seconds"])} | {verdict(r["p@1"], best["p@1"], r["test_images"])} | '
        + (f'{_seconds(reach)} s, {"within" if reach <= best["train_seconds"] else "over"} |'
           if reach is not None else
           f'not within {max(within, 2 * best["train_seconds"]):.0f} s |'))
  return '\n'.join(lines)


def _seconds(seconds: float) -> str:
  return f'{seconds:.2f}' if seconds < 10 else f'{seconds:.1f}'

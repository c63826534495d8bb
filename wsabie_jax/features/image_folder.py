"""A folder of tagged images → a data set of bags of visual terms.

The tags file has one image a line: its path relative to the images folder,
a TAB, then its tags separated by commas (`cats/tom.png<TAB>cat, grey`).
Blank lines and lines starting with # are skipped. Tags seen on fewer than
`min_tag_count` images are dropped, then images left without a tag.

`featurize` learns the codebook on training images only (visual_terms.kmeans
on a sample of their blocks), then writes the folder's libsvm files
(`train.txt`, `test.txt`: the XMC header "images d Y", then a line an
image "tag ids<space>codeword:count ..."), `labels.txt`,
the image paths of each split, `codebook.npy` and `featurize.json` (the block
grid and timings), which `configs/wsabie_folder.py` and
`launch/annotate.py --images` read.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import time
import warnings

import jax
import numpy as np

from wsabie_jax.features import visual_terms
from wsabie_jax.data import libsvm
from wsabie_jax.data.dataset import DataError, from_lists, text_lines


def read_tags(tags_path, images_dir) -> list[tuple[str, list[str]]]:
  """(relative image path, tags) per line; missing images and malformed
  lines raise a DataError naming the tags file and line."""
  images_dir = pathlib.Path(images_dir)
  entries, seen = [], {}
  for line_no, raw in text_lines(tags_path):  # (gzipped or not; a BOM is dropped)
    line = raw.rstrip('\n')
    if not line.strip() or line.startswith('#'):
      continue
    path, sep, tag_text = line.partition('\t')
    if not sep or not path:
      raise DataError(tags_path, line_no, 'expected "image path<TAB>tag, tag, ..."')
    if path in seen:
      raise DataError(tags_path, line_no, f'{path!r} already listed on line {seen[path]}')
    if not (images_dir / path).is_file():
      raise DataError(tags_path, line_no, f'image {images_dir / path} not found')
    seen[path] = line_no
    tags = list(dict.fromkeys(t.strip() for t in tag_text.split(',') if t.strip()))
    entries.append((path, tags))
  if not entries:
    raise DataError(tags_path, None, 'no images listed')
  return entries


def screen_images(entries, images_dir, max_pixels: int, drop_duplicates: bool = True):
  """Drops entries whose image cannot be opened, is larger than `max_pixels`
  (decoding one 600-megapixel PNG costs GBs), or whose bytes equal an earlier
  entry's (a copy in both train and test would leak). Returns (kept entries,
  {path: why} of the dropped ones); only headers are decoded here."""
  from PIL import Image
  seen, kept, dropped = {}, [], {}
  for path, tags in entries:
    file = pathlib.Path(images_dir) / path
    digest = hashlib.sha1(file.read_bytes()).digest() if drop_duplicates else path
    if digest in seen:
      dropped[path] = f'same bytes as {seen[digest]}'
      continue
    try:
      with warnings.catch_warnings():  # Pillow's size warning: the limit is checked below
        warnings.simplefilter('ignore', Image.DecompressionBombWarning)
        with Image.open(file) as im:
          width, height = im.size
          if width * height <= max_pixels:
            # Decoded (a JPEG at 1/8 scale: cheap) so that a truncated file
            # whose header reads is dropped here, not midway through a run.
            im.draft('RGB', (max(1, width // 8), max(1, height // 8)))
            im.load()
    except Exception as e:  # Pillow raises several kinds for files it cannot read
      dropped[path] = f'cannot read the image: {e}'
      continue
    if width * height > max_pixels:
      dropped[path] = f'{width}×{height} pixels, over max_pixels={max_pixels:,}'
      continue
    seen[digest] = path
    kept.append((path, tags))
  return kept, dropped


def vocabulary(entries, min_tag_count: int) -> list[str]:
  """Tags on at least `min_tag_count` images, most frequent first (ties by name)."""
  counts = collections.Counter(t for _, tags in entries for t in tags)
  kept = [t for t, c in counts.items() if c >= min_tag_count]
  return sorted(kept, key=lambda t: (-counts[t], t))


def label_ids(entries, names: list[str]) -> list[tuple[str, list[int]]]:
  """(path, sorted ids of its kept tags), images without a kept tag left out."""
  ids = {t: i for i, t in enumerate(names)}
  tagged = [(p, sorted(ids[t] for t in tags if t in ids)) for p, tags in entries]
  return [(p, labels) for p, labels in tagged if labels]


def split_test(rows: list, test_fraction: float, rng) -> dict[str, list]:
  """A random `test_fraction` held out; both splits keep the listing's order."""
  order = rng.permutation(len(rows))
  num_test = int(round(test_fraction * len(rows)))
  return {'test': [rows[i] for i in np.sort(order[:num_test])],
          'train': [rows[i] for i in np.sort(order[num_test:])]}


def load_images(paths, image_size: int, threads: int = 2) -> np.ndarray:
  """N×S×S×3 float32, decoded in threads (Pillow releases the GIL)."""
  def load(path):
    try:
      return visual_terms.load_image(path, image_size)
    except Exception as e:  # Pillow raises several kinds for files it cannot read
      raise DataError(path, None, f'cannot read the image: {e}') from None
  with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    return np.stack(list(pool.map(load, paths)))


class Featurizer:
  """Images → block descriptors → codewords, in fixed-size batches (one compile)."""

  def __init__(self, grid: visual_terms.BlockGrid, batch_size: int = 64):
    self.grid, self.batch_size = grid, batch_size
    self._describe = visual_terms.batch_descriptors(grid)

  def descriptors(self, paths, on_batch=None):
    """Yields (batch of paths, N×blocks×dim descriptors as numpy)."""
    for start in range(0, len(paths), self.batch_size):
      chunk = paths[start:start + self.batch_size]
      images = np.zeros((self.batch_size, self.grid.image_size, self.grid.image_size, 3), np.float32)
      images[:len(chunk)] = load_images(chunk, self.grid.image_size)
      yield chunk, np.asarray(self._describe(images))[:len(chunk)]
      if on_batch is not None:
        on_batch(start + len(chunk))

  def codes(self, paths, codebook_KxC, on_batch=None) -> np.ndarray:
    """N×blocks codeword ids."""
    out = []
    for _, desc in self.descriptors(paths, on_batch):
      flat = desc.reshape(-1, desc.shape[-1])
      out.append(visual_terms.assign(flat, codebook_KxC).reshape(desc.shape[:2]))
    return np.concatenate(out) if out else np.zeros((0, self.grid.num_blocks), np.int32)


def sample_descriptors(featurizer: Featurizer, paths, num_samples: int, rng, on_batch=None):
  """`num_samples` block descriptors drawn from the given images' blocks."""
  per_image = -(-num_samples // len(paths))
  picked = []
  for _, desc in featurizer.descriptors(paths, on_batch):
    for d in desc:
      picked.append(d[rng.choice(len(d), min(per_image, len(d)), replace=False)])
  points = np.concatenate(picked)
  return points[rng.permutation(len(points))[:num_samples]]


def codebook_size_for(num_train: int) -> int:
  """d, sized to the folder: a visual term every 4 training images, within
  [64, 1,000]. Each term then appears on images enough to be learnt, and
  k-means (its cost ∝ d) stays short on a small folder; paper 000's 10,000
  is for millions of images (--codebook_size sets any d)."""
  return int(np.clip(num_train // 4, 64, 1000))


@dataclasses.dataclass
class FeaturizeSettings:
  codebook_size: int = 0         # 0: codebook_size_for(training images)
  kmeans_samples: int = 100_000
  kmeans_iterations: int = 20
  kmeans_images: int = 2000      # training images whose blocks the k-means sample comes from
  test_fraction: float = 0.1
  min_tag_count: int = 10
  seed: int = 0
  batch_size: int = 64
  max_pixels: int = 50_000_000   # larger images are listed as dropped, not decoded


def featurize(images_dir, tags_path, out_dir, grid: visual_terms.BlockGrid,
              settings: FeaturizeSettings, progress=None) -> dict:
  """The whole pass; returns (and writes as featurize.json) counts and timings.

  `progress(phase, done, total)` is called after each batch of images.
  """
  start = time.perf_counter()
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  listed = read_tags(tags_path, images_dir)
  entries, dropped = screen_images(listed, images_dir, settings.max_pixels)
  names = vocabulary(entries, settings.min_tag_count)
  if not names:
    raise DataError(tags_path, None, f'no tag is on {settings.min_tag_count} images or more '
                    '(lower --min_tag_count)')
  tagged = label_ids(entries, names)
  rng = np.random.default_rng(settings.seed)
  splits = split_test(tagged, settings.test_fraction, rng)
  featurizer = Featurizer(grid, settings.batch_size)
  abs_paths = lambda rows: [str(pathlib.Path(images_dir) / p) for p, _ in rows]
  train_paths = abs_paths(splits['train'])
  sample_from = [train_paths[i] for i in np.sort(rng.permutation(len(train_paths))[:settings.kmeans_images])]
  report = lambda phase, total: (lambda done: progress and progress(phase, done, total))
  if not settings.codebook_size:
    settings = dataclasses.replace(settings, codebook_size=codebook_size_for(len(train_paths)))
  t = time.perf_counter()
  points = sample_descriptors(featurizer, sample_from, settings.kmeans_samples, rng,
                              report('sample blocks', len(sample_from)))
  codebook, inertia = visual_terms.kmeans(
      points, settings.codebook_size, jax.random.PRNGKey(settings.seed), settings.kmeans_iterations,
      on_iteration=lambda it, v: progress and progress('k-means', it + 1, settings.kmeans_iterations))
  seconds = {'codebook': time.perf_counter() - t}
  np.save(out / 'codebook.npy', codebook)
  for split, rows in splits.items():
    t = time.perf_counter()
    codes = featurizer.codes(abs_paths(rows), codebook, report(split, len(rows)))
    libsvm.write_libsvm(from_lists(visual_terms.histograms(codes), [l for _, l in rows],
                                   settings.codebook_size, names), out / f'{split}.txt')
    (out / f'{split}_images.txt').write_text(''.join(p + '\n' for p, _ in rows), encoding='utf-8')
    seconds[split] = time.perf_counter() - t
  (out / 'labels.txt').write_text(''.join(n + '\n' for n in names), encoding='utf-8')
  total = time.perf_counter() - start
  summary = {
      'images_dir': str(images_dir), 'tags': str(tags_path), 'grid': dataclasses.asdict(grid),
      'settings': dataclasses.asdict(settings), 'num_labels': len(names),
      'num_listed': len(listed), 'num_dropped': len(dropped), 'dropped': dropped,
      'num_without_kept_tags': len(entries) - len(tagged),
      'num_train': len(splits['train']), 'num_test': len(splits['test']),
      'kmeans_mean_sq_distance': inertia, 'seconds': {**seconds, 'total': total},
      'seconds_per_image': total / max(len(tagged), 1),
  }
  (out / 'featurize.json').write_text(json.dumps(summary, indent=2), encoding='utf-8')
  return summary


def load_featurizer(data_dir) -> tuple[Featurizer, np.ndarray]:
  """The block grid and codebook a folder was featurised with (for new images)."""
  data_dir = pathlib.Path(data_dir)
  meta = data_dir / 'featurize.json'
  if not meta.exists():
    raise DataError(meta, None, 'not found: featurise the folder first (launch/featurize.py)')
  grid_kw = json.loads(meta.read_text(encoding='utf-8'))['grid']
  grid = visual_terms.BlockGrid(**{**grid_kw, 'block_sizes': tuple(grid_kw['block_sizes'])})
  return Featurizer(grid), np.load(data_dir / 'codebook.npy')


def image_paths(spec: str) -> list[str]:
  """Comma-separated image files and folders (searched recursively)."""
  suffixes = {'.png', '.jpg', '.jpeg', '.gif', '.bmp', '.webp', '.tif', '.tiff'}
  paths = []
  for item in filter(None, spec.split(',')):
    if os.path.isdir(item):
      paths += sorted(str(p) for p in pathlib.Path(item).rglob('*') if p.suffix.lower() in suffixes)
    elif os.path.isfile(item):
      paths.append(item)
    else:
      raise DataError(item, None, 'no such image file or folder')
  return paths


_DC_SUBJECT = '{http://purl.org/dc/elements/1.1/}subject'
_RDF_LI = '{http://www.w3.org/1999/02/22-rdf-syntax-ns#}li'
_NOT_A_KEYWORD = frozenset({'unsorted', ''})


def svg_keywords(svg_path) -> list[str]:
  """An SVG's author keywords: the dc:subject entries (rdf:li items or plain
  text) of its RDF metadata, lower-cased and split at commas, semicolons and
  spaces; the placeholder 'unsorted' is not a keyword."""
  import xml.etree.ElementTree as ET
  try:
    root = ET.parse(svg_path).getroot()
  except ET.ParseError as e:
    raise DataError(svg_path, e.position[0], f'not well-formed XML: {e}') from None
  keywords = []
  for subject in root.iter(_DC_SUBJECT):
    texts = [li.text for li in subject.iter(_RDF_LI)] + [subject.text]
    for text in filter(None, texts):
      keywords += text.lower().replace(',', ' ').replace(';', ' ').split()
  return [k for k in dict.fromkeys(keywords) if k not in _NOT_A_KEYWORD]

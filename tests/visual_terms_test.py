"""Bag of visual terms (paper 000 §6.2) and a folder of tagged images end to end."""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from tests import helpers
from wsabie_jax.features import visual_terms
from wsabie_jax.data import libsvm
from wsabie_jax.features import image_folder
from wsabie_jax.data.dataset import DataError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = visual_terms.BlockGrid(image_size=32, block_sizes=(8, 16), colour_levels=3, orientations=4)


def reference_descriptors(image, grid):
  """Block by block, pixel by pixel, straight from the definitions."""
  L, O = grid.colour_levels, grid.orientations
  grey = image @ np.asarray([0.299, 0.587, 0.114])
  gy, gx = np.gradient(grey)
  mag, ang = np.hypot(gx, gy), np.mod(np.arctan2(gy, gx), np.pi)
  out = []
  for top, left, size in zip(*grid.corners()):
    colour = np.zeros(L ** 3)
    edges = np.zeros((4, O))
    for y in range(top, top + size):
      for x in range(left, left + size):
        q = np.clip(np.floor(image[y, x] * L), 0, L - 1).astype(int)
        colour[(q[0] * L + q[1]) * L + q[2]] += 1
        quadrant = 2 * ((y - top) >= size // 2) + ((x - left) >= size // 2)
        edges[quadrant, min(int(ang[y, x] / np.pi * O), O - 1)] += mag[y, x]
    edges = edges.ravel() / (edges.sum() + grid.edge_floor * size * size)
    out.append(np.sqrt(np.concatenate([colour / size ** 2, edges])))
  return np.stack(out)


def test_block_grid_counts_overlapping_blocks_at_each_scale():
  top, left, size = GRID.corners()
  assert GRID.num_blocks == 7 * 7 + 3 * 3  # stride = half a block
  assert set(size) == {8, 16} and (top + size).max() == 32 and (left + size).max() == 32
  assert GRID.cell == 4 and GRID.descriptor_dim == 27 + 16
  with pytest.raises(ValueError, match='multiple of'):
    visual_terms.BlockGrid(image_size=30, block_sizes=(8, 16))


def test_descriptors_match_the_per_pixel_reference():
  rng = np.random.default_rng(0)
  image = rng.random((32, 32, 3)).astype(np.float32)
  image[:16, :16] = [1.0, 1.0, 1.0]  # a flat block: its edge part must be ~0
  got = np.asarray(visual_terms.block_descriptors(image, GRID))
  np.testing.assert_allclose(got, reference_descriptors(image.astype(np.float64), GRID),
                             atol=2e-3)
  # The colour part is the root of a histogram of fractions: unit norm.
  np.testing.assert_allclose(np.linalg.norm(got[:, :27], axis=1), 1.0, atol=1e-4)
  assert np.abs(got[0, 27:]).max() < 1e-3


def test_kmeans_finds_separated_clusters_and_never_gets_worse():
  rng = np.random.default_rng(1)
  centres = rng.normal(size=(5, 8)) * 10
  points = (centres[rng.integers(0, 5, 3000)] + rng.normal(size=(3000, 8)) * 0.1).astype(np.float32)
  codebook, history = visual_terms.kmeans(points, 5, jax.random.PRNGKey(0), iterations=15)
  # Every true centre has a codeword next to it (from 5 random data points
  # this seed merges two clusters; k-means++ seeding separates them).
  dist = np.linalg.norm(centres[:, None] - codebook[None], axis=-1).min(1)
  assert dist.max() < 0.05, dist
  assert all(b <= a + 1e-4 for a, b in zip(history, history[1:])), history
  assert history[-1] == pytest.approx(8 * 0.01, rel=0.1)  # the noise variance per point


def test_kmeans_plus_plus_seeds_far_apart():
  rng = np.random.default_rng(3)
  centres = rng.normal(size=(6, 4)) * 10
  points = (centres[rng.integers(0, 6, 600)] + rng.normal(size=(600, 4)) * 0.1).astype(np.float32)
  hits = 0
  for seed in range(20):  # one draw per cluster, unless a ~1e-4-probability draw repeats one
    seeds = np.asarray(visual_terms.kmeans_plus_plus(points, 6, jax.random.PRNGKey(seed)))
    nearest = np.linalg.norm(seeds[:, None] - centres[None], axis=-1).argmin(1)
    hits += len(set(nearest.tolist())) == 6
  assert hits == 20


def test_assign_in_chunks_equals_brute_force():
  rng = np.random.default_rng(2)
  points = rng.normal(size=(1000, 6)).astype(np.float32)
  codebook = rng.normal(size=(37, 6)).astype(np.float32)
  want = np.argmin(((points[:, None] - codebook[None]) ** 2).sum(-1), 1)
  np.testing.assert_array_equal(visual_terms.assign(points, codebook, chunk=128), want)


def test_histograms_count_codewords():
  codes = np.array([[3, 1, 3, 3, 0], [2, 2, 2, 2, 2]])
  (ids0, c0), (ids1, c1) = visual_terms.histograms(codes)
  assert ids0.tolist() == [0, 1, 3] and c0.tolist() == [1, 1, 3]
  assert ids1.tolist() == [2] and c1.tolist() == [5]


SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:cc="http://web.resource.org/cc/"
     xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://www.w3.org/2000/svg">
  <metadata><rdf:RDF><cc:Work rdf:about="">
    <dc:title>red fish</dc:title>
    <dc:subject>
      <rdf:Bag><rdf:li>Fish</rdf:li><rdf:li>animal, sea</rdf:li><rdf:li>unsorted</rdf:li>
      <rdf:li>fish</rdf:li></rdf:Bag>
    </dc:subject>
  </cc:Work></rdf:RDF></metadata>
  <rect width="10" height="10" fill="red"/>
</svg>
"""


def test_svg_keywords_read_dc_subject(tmp_path):
  (tmp_path / 'fish.svg').write_text(SVG)
  assert image_folder.svg_keywords(tmp_path / 'fish.svg') == ['fish', 'animal', 'sea']
  (tmp_path / 'bad.svg').write_text('<svg><metadata>')
  with pytest.raises(DataError, match='bad.svg'):
    image_folder.svg_keywords(tmp_path / 'bad.svg')


def _write_png(path, colour, shape, rng, size=40):
  from PIL import Image, ImageDraw
  im = Image.new('RGBA', (size, size + int(rng.integers(0, 20))), (0, 0, 0, 0))  # transparent
  draw = ImageDraw.Draw(im)
  box = [int(v) for v in rng.integers(2, 10, 2)] + [int(v) for v in rng.integers(28, 38, 2)]
  (draw.ellipse if shape == 'circle' else draw.rectangle)(box, fill=colour)
  path.parent.mkdir(parents=True, exist_ok=True)
  im.save(path)


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
  """80 PNGs: red / blue × circle / square, tagged by what they show."""
  root = tmp_path_factory.mktemp('images')
  rng = np.random.default_rng(0)
  lines = []
  for i in range(80):
    colour, shape = ['red', 'blue'][i % 2], ['circle', 'square'][(i // 2) % 2]
    rgb = {'red': (220, 30, 30, 255), 'blue': (30, 30, 220, 255)}[colour]
    _write_png(root / shape / f'{i}.png', rgb, shape, rng)
    lines.append(f'{shape}/{i}.png\t{colour}, {shape}\n')
  (root / 'copy.png').write_bytes((root / 'circle' / '0.png').read_bytes())
  lines.append('copy.png\tred, circle\n')
  (root / 'tags.tsv').write_text(''.join(lines))
  return root


def test_read_tags_errors_name_file_and_line(folder, tmp_path):
  bad = tmp_path / 'tags.tsv'
  bad.write_text('circle/0.png\tred\nno_tab_here\n')
  with pytest.raises(DataError, match=r'tags.tsv, line 2: expected'):
    image_folder.read_tags(bad, folder)
  bad.write_text('# comment\n\nmissing.png\tred\n')
  with pytest.raises(DataError, match=r'line 3: image .*missing.png not found'):
    image_folder.read_tags(bad, folder)
  bad.write_text('circle/0.png\tred\ncircle/0.png\tblue\n')
  with pytest.raises(DataError, match='already listed on line 1'):
    image_folder.read_tags(bad, folder)


def _run(*args):
  out = subprocess.run([sys.executable, *args], cwd=ROOT, env=helpers.one_device_env(),
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


@pytest.mark.slow  # a whole training
def test_featurize_train_annotate_a_folder(folder, tmp_path):
  data, run = tmp_path / 'data', tmp_path / 'run'
  out = _run('launch/featurize.py', f'--images={folder}', f'--tags={folder / "tags.tsv"}',
             f'--out={data}', '--codebook_size=24', '--image_size=32', '--block_sizes=8,16',
             '--kmeans_samples=2000', '--min_tag_count=5', '--test_fraction=0.25')
  summary = json.loads((data / 'featurize.json').read_text())
  assert summary['num_dropped'] == 1 and 'same bytes as' in summary['dropped']['copy.png']
  assert (summary['num_train'], summary['num_test']) == (60, 20) and 'ms per image' in out
  names = (data / 'labels.txt').read_text().split()
  assert sorted(names) == ['blue', 'circle', 'red', 'square']
  train = libsvm.read_libsvm(data / 'train.txt', label_names=names)
  assert train.num_images == 60 and train.num_features == 24
  counts = np.add.reduceat(train.feat_val, train.feat_indptr[:-1])
  np.testing.assert_array_equal(counts, 7 * 7 + 3 * 3)  # every block counted once
  _run('launch/train.py', f'--config=configs/wsabie_folder.py:{data}', f'--workdir={run}',
       '--config.train.num_epochs=30', '--config.train.eval_every_steps=20',
       '--config.train.patience=100', '--config.data.validation_fraction=0.2')
  metrics = json.loads((run / 'metrics.json').read_text())
  # Colour and shape are both visible: the top two tags are nearly always right
  # (the frequency baseline gets half of them).
  assert metrics['p@1'] >= 0.9 and metrics['freq_p@1'] <= 0.6, metrics
  lines = _run('launch/annotate.py', f'--workdir={run}', f'--images={folder / "circle"}',
               '--k=2').splitlines()
  assert len(lines) == 40 and all('.png: ' in line for line in lines)
  hits = sum('circle' in line.split(': ', 1)[1] for line in lines)
  assert hits >= 36, lines


def test_the_codebook_is_sized_to_the_folder():
  from wsabie_jax.features import image_folder
  sizes = [image_folder.codebook_size_for(n) for n in (10, 180, 2000, 8154, 10**6)]
  assert sizes == [64, 64, 500, 1000, 1000]

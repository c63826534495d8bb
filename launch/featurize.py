"""A folder of tagged images → a WSABIE data set of bags of visual terms.

  python launch/featurize.py --images=DIR --tags=FILE --out=DATA_DIR
  python launch/train.py --config=configs/wsabie_folder.py:DATA_DIR --workdir=RUN
  python launch/annotate.py --workdir=RUN --images=photo.png,more_photos/

FILE lists one image a line: its path under DIR, a TAB, its tags separated by
commas. The features are paper 000 §6.2's (wsabie_jax/features/visual_terms.py):
overlapping blocks at several scales, colour + edge descriptors, a k-means
codebook learnt in JAX on the training images, sparse histograms. A held-out
`--test_fraction` of the images becomes test.txt.

Offline real data: Debian's clip art, whose authors' keywords sit in each
SVG's dc:subject (`apt-get install openclipart-svg openclipart-png`, then
`python launch/openclipart_tags.py --out=tags.tsv`, images under
/usr/share/openclipart/png).
"""
from wsabie_jax.core import startup  # noqa: F401 (first: a signal while importing is one line)
import sys


from absl import flags, logging

from wsabie_jax.training import progress as progress_lib
from wsabie_jax.features import visual_terms
from wsabie_jax.features import image_folder
from wsabie_jax.api import cli

_IMAGES = flags.DEFINE_string('images', None, 'Folder the tags file paths are relative to.',
                              required=True)
_TAGS = flags.DEFINE_string('tags', None, 'Tags file: path<TAB>tag, tag, ...', required=True)
_OUT = flags.DEFINE_string('out', None, 'Where to write the data set.', required=True)
_CODEBOOK = flags.DEFINE_integer('codebook_size', 0, 'd, the number of visual terms; 0: '
                                 'one every 4 training images, within 64-1,000 (paper 000: '
                                 '10,000 for millions of images).')
_IMAGE_SIZE = flags.DEFINE_integer('image_size', 128, 'Side of the square each image is resampled to.')
_BLOCKS = flags.DEFINE_list('block_sizes', ['16', '32', '64'], 'Block sides (stride: half a block).')
_SAMPLES = flags.DEFINE_integer('kmeans_samples', 100_000, 'Block descriptors k-means learns from.')
_ITERATIONS = flags.DEFINE_integer('kmeans_iterations', 20, "Lloyd's iterations.")
_TEST = flags.DEFINE_float('test_fraction', 0.1, 'Images held out as the test split.')
_MIN_TAG = flags.DEFINE_integer('min_tag_count', 10, 'Keep tags on at least this many images.')
_SEED = flags.DEFINE_integer('seed', 0, 'Split, sample and k-means seed.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  grid = visual_terms.BlockGrid(image_size=_IMAGE_SIZE.value,
                                block_sizes=tuple(int(s) for s in _BLOCKS.value))
  settings = image_folder.FeaturizeSettings(
      codebook_size=_CODEBOOK.value, kmeans_samples=_SAMPLES.value,
      kmeans_iterations=_ITERATIONS.value, test_fraction=_TEST.value,
      min_tag_count=_MIN_TAG.value, seed=_SEED.value)
  bars = {}

  def progress(phase, done, total):
    if phase not in bars:
      print(f'{phase}:', file=sys.stderr)
      unit = 'iterations' if phase == 'k-means' else 'images'
      bars[phase] = progress_lib.Progress(total, 1, unit=unit, step_name=unit[:-1])
      bars[phase].update(0)
    bars[phase].update(done)
    if done == total:
      bars[phase].close()

  s = image_folder.featurize(_IMAGES.value, _TAGS.value, _OUT.value, grid, settings, progress)
  sec = s['seconds']
  for path, why in list(s['dropped'].items())[:5]:
    print(f'dropped {path}: {why}')
  print(f'{s["num_listed"]:,} images listed, {s["num_dropped"]:,} dropped (duplicates, unreadable, '
        f'too large: featurize.json lists them), {s["num_without_kept_tags"]:,} without a kept tag; '
        f'{s["num_train"]:,} train / {s["num_test"]:,} test, {s["num_labels"]} tags, '
        f'd = {s["settings"]["codebook_size"]:,} visual terms, {grid.num_blocks} blocks an image')
  print(f'codebook {sec["codebook"]:.1f} s, train {sec["train"]:.1f} s, test {sec["test"]:.1f} s; '
        f'total {sec["total"]:.1f} s = {1e3 * s["seconds_per_image"]:.1f} ms per image')
  print(f'wrote {_OUT.value}/ (train.txt, test.txt, labels.txt, codebook.npy, featurize.json)')


if __name__ == '__main__':
  cli.main(main)

"""Tags file for Debian's clip art: each PNG with its SVG's author keywords.

  apt-get install openclipart-svg openclipart-png
  python launch/openclipart_tags.py --out=/tmp/clipart/tags.tsv
  python launch/featurize.py --images=/usr/share/openclipart/png \
      --tags=/tmp/clipart/tags.tsv --out=/tmp/clipart/data

Each SVG under --svg_dir whose PNG rendering exists at the same relative
path under --png_dir gives a line "path.png<TAB>keyword, keyword, ...".
SVGs without keywords are listed with none (featurize.py drops them).
"""
import pathlib


from absl import flags

from wsabie_jax.data import DataError
from wsabie_jax.features import image_folder
from wsabie_jax.api import cli

_SVG = flags.DEFINE_string('svg_dir', '/usr/share/openclipart/svg', 'openclipart-svg files.')
_PNG = flags.DEFINE_string('png_dir', '/usr/share/openclipart/png', 'openclipart-png files.')
_OUT = flags.DEFINE_string('out', None, 'The tags file to write.', required=True)


def main(argv):
  del argv
  svg_dir, png_dir = pathlib.Path(_SVG.value), pathlib.Path(_PNG.value)
  svgs = sorted(svg_dir.rglob('*.svg'))
  if not svgs:
    raise DataError(svg_dir, None, 'no SVG files here (apt-get install openclipart-svg)')
  lines, with_keywords, without_png = [], 0, 0
  for svg in svgs:
    png = svg.relative_to(svg_dir).with_suffix('.png')
    if not (png_dir / png).is_file():
      without_png += 1
      continue
    keywords = image_folder.svg_keywords(svg)
    with_keywords += bool(keywords)
    lines.append(f'{png}\t{", ".join(keywords)}\n')
  out = pathlib.Path(_OUT.value)
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(''.join(lines), encoding='utf-8')
  print(f'{len(svgs):,} SVGs, {without_png:,} without a PNG; wrote {len(lines):,} images '
        f'({with_keywords:,} with keywords) to {out}')


if __name__ == '__main__':
  cli.main(main)

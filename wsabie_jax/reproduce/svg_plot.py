"""A dependency-free SVG line plot (for figures written by launch scripts)."""
from __future__ import annotations

import html
import pathlib

_COLOURS = ('#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd')


def line_plot(path, series: dict[str, tuple[list[float], list[float]]], *, title: str,
              xlabel: str, ylabel: str, width: int = 640, height: int = 400) -> None:
  """Writes the named (x, y) series as polylines on shared linear axes."""
  xs = [x for xv, _ in series.values() for x in xv]
  ys = [y for _, yv in series.values() for y in yv]
  if not xs:
    raise ValueError(f'{path}: nothing to plot')
  x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
  y0, y1 = min(0.0, min(ys)), max(ys) * 1.05 if max(ys) > 0 else 1.0
  left, right, top, bottom = 70, 20, 40, 50
  sx = lambda x: left + (x - x0) / (x1 - x0) * (width - left - right)
  sy = lambda y: height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)
  out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
         f'<line x1="{left}" y1="{sy(y0)}" x2="{width - right}" y2="{sy(y0)}" stroke="black"/>',
         f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
         f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">{html.escape(xlabel)}</text>',
         f'<text x="15" y="{height / 2}" text-anchor="middle" '
         f'transform="rotate(-90 15 {height / 2})">{html.escape(ylabel)}</text>']
  for i in range(5):
    xt, yt = x0 + i * (x1 - x0) / 4, y0 + i * (y1 - y0) / 4
    out.append(f'<text x="{sx(xt)}" y="{height - bottom + 15}" text-anchor="middle">{xt:.4g}</text>')
    out.append(f'<text x="{left - 5}" y="{sy(yt) + 4}" text-anchor="end">{yt:.4g}</text>')
  for i, (name, (xv, yv)) in enumerate(series.items()):
    colour = _COLOURS[i % len(_COLOURS)]
    points = ' '.join(f'{sx(x):.1f},{sy(y):.1f}' for x, y in zip(xv, yv))
    out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
    out.append(f'<text x="{left + 10}" y="{top + 15 * (i + 1)}" fill="{colour}">{html.escape(name)}</text>')
  out.append('</svg>')
  pathlib.Path(path).write_text('\n'.join(out) + '\n')

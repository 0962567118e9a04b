#!/usr/bin/env python3
"""plot_ratio.py CSV SVG BASE_COL BATON_COL LABEL_COLS [TITLE] -- draws, from
any CSV of side-by-side timings, one horizontal bar per row: BASE_COL /
BATON_COL (> 1: baton faster), with the line at 1, each bar labelled by the
row's LABEL_COLS (comma-separated column names).  python3 standard library
only.  Used for tools/measure/torch_embed.py (torch_us baton_us dtype,indices,B,T,D)
and tests/gpu_gemm --csv (cublas_us engine_us M,N,K).
"""
import csv, sys

if len(sys.argv) not in (6, 7):
    sys.exit('usage: plot_ratio.py CSV SVG BASE_COL BATON_COL LABEL_COLS [TITLE]')
path, out, base, mine, labels = sys.argv[1:6]
title = sys.argv[6] if len(sys.argv) == 7 else f'{base} / {mine}'
rows = list(csv.DictReader(open(path, newline='')))
cols = labels.split(',')
if not rows or not {base, mine, *cols} <= set(rows[0]):
    sys.exit(f'plot_ratio.py: {path}: wants columns {base}, {mine}, {labels}')

bars = []
for r in rows:
    try:
        b, m = float(r[base]), float(r[mine])
    except ValueError:
        continue
    if b > 0 and m > 0:
        bars.append((' '.join(r[c] for c in cols), b / m))
if not bars:
    sys.exit(f'plot_ratio.py: {path}: no row has both times')

top = max(2.0, max(v for _, v in bars) * 1.05)
W, LEFT, RIGHT, ROW, HEAD = 760, 230, 40, 16, 40
H = HEAD + ROW * len(bars) + 40
scale = (W - LEFT - RIGHT) / top
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>']
for i, (name, v) in enumerate(bars):
    y = HEAD + i * ROW
    color = '#1f77b4' if v >= 1 else '#d62728'
    svg.append(f'<text x="{LEFT - 6}" y="{y + 11}" text-anchor="end">{name}</text>')
    svg.append(f'<rect x="{LEFT}" y="{y + 2}" width="{v * scale:.1f}" height="{ROW - 4}" fill="{color}"/>')
    svg.append(f'<text x="{LEFT + v * scale + 4:.1f}" y="{y + 11}">{v:.2f}</text>')
x1 = LEFT + scale
svg.append(f'<line x1="{x1:.1f}" y1="{HEAD - 4}" x2="{x1:.1f}" y2="{H - 30}" stroke="black" stroke-dasharray="4,3"/>')
svg.append(f'<text x="{x1:.1f}" y="{H - 16}" text-anchor="middle">1 (equal)</text>')
svg.append('</svg>')
open(out, 'w').write('\n'.join(svg) + '\n')

#!/usr/bin/env python3
"""plot_net.py OUT.svg NAME=BENCH.csv ... -- draws `baton bench --csv` runs
over the network transport (tools/measure/gpu_net.sh): baton's time per call and
the payload rate each rank sent over the network, against size, one curve
per run (python3 standard library only)."""
import csv, math, sys

if len(sys.argv) < 3 or any('=' not in a for a in sys.argv[2:]):
    sys.exit('usage: plot_net.py OUT.svg NAME=BENCH.csv ...')
runs = []
for arg in sys.argv[2:]:
    name, path = arg.split('=', 1)
    rows = list(csv.DictReader(open(path, newline='')))
    if not rows or 'baton_net_bytes' not in rows[0]:
        sys.exit(f'plot_net.py: {path}: not a baton bench CSV with baton_net_bytes')
    t, r = [], []
    for row in rows:
        size, us = int(row['size']), row['baton_time_us']
        if size <= 0 or us in ('', None) or float(us) <= 0:
            continue
        t.append((size, float(us)))
        nb = float(row['baton_net_bytes'] or 0)
        if nb > 0:
            r.append((size, nb / (float(us) * 1e3)))   # bytes per ns = GB/s
    runs.append((name, t, r))

COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
          '#17becf']
PW, PH, L, B, T, R = 460, 340, 70, 50, 40, 20
W, H = 2 * PW, PH + 40 + 16 * ((len(runs) + 1) // 2)
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">baton over the network transport '
     f'(loopback TCP unless noted)</text>']


def fmt_size(b):
    for unit, s in ((1 << 30, 'G'), (1 << 20, 'M'), (1 << 10, 'K')):
        if b >= unit:
            return f'{b / unit:g}{s}'
    return str(b)


def panel(x0, title, ylabel, key, logy):
    pts = [p for run in runs for p in run[key]]
    if not pts:
        return
    xs = [math.log2(p[0]) for p in pts]
    ys = [math.log10(p[1]) if logy else p[1] for p in pts]
    xlo, xhi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    ylo, yhi = (math.floor(min(ys)), math.ceil(max(ys))) if logy else (0, max(ys) * 1.1 or 1)
    if yhi == ylo:
        yhi = ylo + 1
    def X(v): return x0 + L + (v - xlo) / (xhi - xlo) * (PW - L - R)
    def Y(v): return T + (1 - (v - ylo) / (yhi - ylo)) * (PH - T - B)
    o.append(f'<text x="{x0 + PW/2}" y="{T - 8}" text-anchor="middle">{title}</text>')
    o.append(f'<rect x="{x0 + L}" y="{T}" width="{PW - L - R}" height="{PH - T - B}" fill="none" stroke="#999"/>')
    for e in range(int(xlo), int(xhi) + 1, 2):
        o.append(f'<text x="{X(e):.1f}" y="{PH - B + 16}" text-anchor="middle">{fmt_size(2 ** e)}</text>')
    ticks = range(int(ylo), int(yhi) + 1) if logy else [ylo + (yhi - ylo) * i / 5 for i in range(6)]
    for v in ticks:
        lab = f'{10 ** v:g}' if logy else f'{v:.2f}'
        o.append(f'<line x1="{x0 + L}" x2="{x0 + PW - R}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#eee"/>')
        o.append(f'<text x="{x0 + L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{lab}</text>')
    o.append(f'<text x="{x0 + 16}" y="{(T + PH - B) / 2}" transform="rotate(-90 {x0 + 16} {(T + PH - B) / 2})" '
             f'text-anchor="middle">{ylabel}</text>')
    o.append(f'<text x="{x0 + PW/2}" y="{PH - B + 34}" text-anchor="middle">size (bytes)</text>')
    for i, run in enumerate(runs):
        p = run[key]
        if not p:
            continue
        path = ' '.join(f'{X(math.log2(s)):.1f},{Y(math.log10(v) if logy else v):.1f}' for s, v in p)
        o.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[i % 10]}" stroke-width="2"/>')


panel(0, 'time per call', 'us (log)', 1, True)
panel(PW, 'network payload rate per rank, each way', 'GB/s', 2, False)
for i, run in enumerate(runs):
    x, y = 20 + (i % 2) * PW, PH + 20 + 16 * (i // 2)
    o.append(f'<rect x="{x}" y="{y - 9}" width="14" height="4" fill="{COLORS[i % 10]}"/>')
    o.append(f'<text x="{x + 20}" y="{y - 4}">{run[0]}</text>')
o.append('</svg>')
open(sys.argv[1], 'w').write('\n'.join(o) + '\n')

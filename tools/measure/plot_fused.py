#!/usr/bin/env python3
"""plot_fused.py CSV SVG -- draws `baton bench --fused ... --csv` output as one
SVG (python3 standard library only): per shape (M x K), the times of cuBLAS's
GEMV, NCCL's AllReduce, the baseline (both in a row) and baton's fused call
as bars; and the ratio the run is about -- cuBLAS time / baton time with one
rank (the GEMV alone), baseline time / baton time with more -- with the line
at 1.  Times that were not measured are left out."""
import csv, math, sys

if len(sys.argv) != 3:
    sys.exit('usage: plot_fused.py FUSED.csv OUT.svg')
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
need = {'fused', 'dtype', 'ranks', 'M', 'K', 'gemv_us', 'allreduce_us', 'baseline_us', 'baton_us', 'speedup', 'vs_cublas'}
if not rows or not need <= set(rows[0]):
    sys.exit(f'plot_fused.py: {sys.argv[1]}: not a baton bench --fused CSV (wants columns {", ".join(sorted(need))})')

def val(r, k):
    try:
        v = float(r[k])
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None

one = rows[0]['ranks'] == '1'
BARS = (('gemv_us', 'cuBLAS GEMV', '#76b900'), ('allreduce_us', 'NCCL AllReduce', '#bcbd22'),
        ('baseline_us', 'baseline (GEMV, then AllReduce)', '#7f7f7f'), ('baton_us', 'baton fused', '#1f77b4'))
if one:
    BARS = (BARS[0], BARS[3])
ratio_col, ratio_label = ('vs_cublas', 'cuBLAS time / baton time') if one else ('speedup', 'baseline time / baton time')
labels = [f'{int(r["M"])}x{int(r["K"])}' for r in rows]

PW, PH, L, B, T, R = max(420, 34 * len(rows) * (len(BARS) + 1) // 2 + 90), 340, 70, 70, 40, 20
W, H = PW, 2 * PH + 30
r0 = rows[0]
title = (f'baton bench --fused {r0["fused"]}: {r0["ranks"]} rank{"" if one else "s"}, {r0["dtype"]}' +
         (', ranks sharing GPUs' if r0.get('share', '0') not in ('0', '') else ''))
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">{title}</text>']

def axes(g, ylabel, ticks, Y):
    g.append(f'<line x1="{L}" y1="{PH-B}" x2="{PW-R}" y2="{PH-B}" stroke="black"/>'
             f'<line x1="{L}" y1="{T}" x2="{L}" y2="{PH-B}" stroke="black"/>')
    for v in ticks:
        g.append(f'<line x1="{L-5}" y1="{Y(v):.1f}" x2="{L}" y2="{Y(v):.1f}" stroke="black"/>'
                 f'<text x="{L-8}" y="{Y(v)+4:.1f}" text-anchor="end">{v:g}</text>')
    g.append(f'<text x="16" y="{PH/2}" transform="rotate(-90 16 {PH/2})" text-anchor="middle">{ylabel}</text>')
    slot = (PW - L - R) / len(rows)
    for i, lab in enumerate(labels):
        x = L + (i + 0.5) * slot
        g.append(f'<text x="{x:.1f}" y="{PH-B+14}" text-anchor="end" transform="rotate(-35 {x:.1f} {PH-B+14})">{lab}</text>')
    return slot

# Panel 1: times (log).
g = ['<g transform="translate(0,30)" class="panel" data-y="time">']
ts = [val(r, c) for r in rows for c, _, _ in BARS if val(r, c)]
if ts:
    e0, e1 = math.floor(math.log10(min(ts))), math.ceil(math.log10(max(ts)))
    if e0 == e1: e1 += 1
    Y = lambda y: PH - B - (math.log10(y) - e0) / (e1 - e0) * (PH - B - T)
    slot = axes(g, 'time per call (us, log)', [10 ** e for e in range(e0, e1 + 1)], Y)
    w = slot / (len(BARS) + 1)
    for i, r in enumerate(rows):
        for k, (c, lab, col) in enumerate(BARS):
            v = val(r, c)
            if v is None: continue
            x = L + i * slot + (k + 0.5) * w
            g.append(f'<rect class="bar" data-series="{c}" x="{x:.1f}" y="{Y(v):.1f}" width="{w*0.9:.1f}" '
                     f'height="{PH-B-Y(v):.1f}" fill="{col}"/>')
    for k, (c, lab, col) in enumerate(BARS):
        g.append(f'<rect x="{L+15}" y="{T+k*16-9}" width="10" height="10" fill="{col}"/><text x="{L+30}" y="{T+k*16}">{lab}</text>')
else:
    g.append(f'<text x="{PW/2}" y="{PH/2}" text-anchor="middle">no times</text>')
g.append('</g>')
o += g

# Panel 2: the ratio, with the line at 1.
g = [f'<g transform="translate(0,{PH+30})" class="panel" data-y="{ratio_col}">']
qs = [val(r, ratio_col) for r in rows]
if any(qs):
    top = max(1.25, max(q for q in qs if q) * 1.15)
    Y = lambda y: PH - B - y / top * (PH - B - T)
    step = 0.25 if top <= 2 else 0.5 if top <= 4 else 1
    slot = axes(g, ratio_label, [k * step for k in range(int(top / step) + 1)], Y)
    g.append(f'<line x1="{L}" y1="{Y(1):.1f}" x2="{PW-R}" y2="{Y(1):.1f}" stroke="#d62728" stroke-dasharray="4,3"/>')
    for i, q in enumerate(qs):
        if q is None: continue
        x = L + (i + 0.2) * slot
        g.append(f'<rect class="ratio" x="{x:.1f}" y="{Y(q):.1f}" width="{slot*0.6:.1f}" height="{PH-B-Y(q):.1f}" '
                 f'fill="#1f77b4"/><text x="{x+slot*0.3:.1f}" y="{Y(q)-4:.1f}" text-anchor="middle">{q:.2f}</text>')
else:
    g.append(f'<text x="{PW/2}" y="{PH/2}" text-anchor="middle">no {ratio_label}</text>')
g.append('</g>')
o += g
o.append('</svg>')
open(sys.argv[2], 'w').write('\n'.join(o) + '\n')

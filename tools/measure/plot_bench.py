#!/usr/bin/env python3
"""plot_bench.py CSV SVG [TYPE[/REDOP]] -- draws `baton bench --csv` output:
latency and bus bandwidth against size, NCCL and baton, as one SVG (python3
standard library only).  A CSV of `-I both` (rows out of place and in place)
gets a curve per library and placement, in place dashed.  A CSV of `-d all`
or `-o all` holds several (type, redop) pairs: one is drawn, the first in
the CSV or the one TYPE[/REDOP] names (f16/max; f16 alone: its first op),
and the title says how many there are.  Sizes with no time (a failed call,
NCCL not loaded, size 0) are left out of the curves."""
import csv, math, sys

if len(sys.argv) not in (3, 4):
    sys.exit('usage: plot_bench.py BENCH.csv OUT.svg [TYPE[/REDOP]]')
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
need = {'size', 'nccl_time_us', 'baton_time_us', 'nccl_busbw', 'baton_busbw', 'collective', 'nranks', 'type'}
if not rows or not need <= set(rows[0]):
    sys.exit(f'plot_bench.py: {sys.argv[1]}: not a baton bench CSV (wants columns {", ".join(sorted(need))})')

# The (type, redop) pairs in the CSV's order (-d all / -o all: several);
# the rows of one are drawn.
COMBOS = list(dict.fromkeys((r['type'], r.get('redop') or '') for r in rows))
if len(sys.argv) == 4:
    want_type, _, want_op = sys.argv[3].partition('/')
    pick = [c for c in COMBOS if c[0] == want_type and want_op in ('', c[1])]
    if not pick:
        sys.exit(f'plot_bench.py: {sys.argv[1]} has no {sys.argv[3]} rows (it has '
                 f'{", ".join("/".join(c) for c in COMBOS)})')
    COMBO = pick[0]
else:
    COMBO = COMBOS[0]
    if len(COMBOS) > 1:
        print(f'plot_bench.py: drawing {"/".join(COMBO)}, the first of {len(COMBOS)} type/redop pairs in '
              f'{sys.argv[1]} (name another as a third argument: TYPE/REDOP)', file=sys.stderr)
rows = [r for r in rows if (r['type'], r.get('redop') or '') == COMBO]

LIBS = (('nccl', 'NCCL', '#76b900'), ('baton', 'baton', '#1f77b4'))
# The placements in the CSV ('0' out of place, '1' in place; CSVs without
# the column: out of place); with both, each curve is one placement's.
PLACES = sorted({r.get('inplace') or '0' for r in rows})
PLACE_NAME = {'0': 'out of place', '1': 'in place'}
CURVES = [(lib, lab if len(PLACES) == 1 else f'{lab} {PLACE_NAME.get(p, p)}', c, p)
          for lib, lab, c in LIBS for p in PLACES]

def series(lib, col, place):
    return [(int(r['size']), float(r[f'{lib}_{col}'])) for r in rows
            if (r.get('inplace') or '0') == place and int(r['size']) > 0 and r[f'{lib}_{col}'] not in ('', None)
            and float(r[f'{lib}_{col}']) > 0]

PW, PH, L, B, T, R = 460, 340, 70, 50, 40, 20   # one panel
W, H = 2 * PW, PH + 30
r0 = rows[0]
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">baton bench: {r0["collective"]}, '
     f'{r0["nranks"]} ranks, {r0["type"]} {r0.get("redop", "")}'
     f'{" in place" if PLACES == ["1"] else " out of place and in place" if len(PLACES) > 1 else ""}'
     f'{f" (1 of {len(COMBOS)} type/redop pairs)" if len(COMBOS) > 1 else ""}</text>']

def fmt_size(b):
    for unit, s in ((1 << 30, 'G'), (1 << 20, 'M'), (1 << 10, 'K')):
        if b >= unit: return f'{b / unit:g}{s}'
    return str(b)

def panel(x0, col, ylabel, logy):
    data = [(lib, lab, c, p, series(lib, col, p)) for lib, lab, c, p in CURVES]
    pts = [p for *_, s in data for p in s]
    g = [f'<g transform="translate({x0},30)" class="panel" data-y="{col}">']
    if not pts:
        g.append(f'<text x="{PW/2}" y="{PH/2}" text-anchor="middle">no {col} values</text></g>')
        return g
    xs = [math.log2(x) for x, _ in pts]
    lx0, lx1 = min(xs) - 0.5, max(xs) + 0.5
    ys = [y for _, y in pts]
    if logy:
        ly0, ly1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
        if ly0 == ly1: ly1 += 1
        Y = lambda y: PH - B - (math.log10(y) - ly0) / (ly1 - ly0) * (PH - B - T)
        ticks = [10 ** e for e in range(ly0, ly1 + 1)]
    else:
        top = max(ys) * 1.1
        Y = lambda y: PH - B - y / top * (PH - B - T)
        step = 10 ** math.floor(math.log10(top / 2)) if top > 0 else 1
        ticks = [k * step for k in range(int(top / step) + 1)]
    X = lambda x: L + (math.log2(x) - lx0) / (lx1 - lx0) * (PW - L - R)
    g.append(f'<line x1="{L}" y1="{PH-B}" x2="{PW-R}" y2="{PH-B}" stroke="black"/>'
             f'<line x1="{L}" y1="{T}" x2="{L}" y2="{PH-B}" stroke="black"/>')
    e0, e1 = math.ceil(lx0), math.floor(lx1)
    stride = max(1, (e1 - e0) // 8 + 1)
    for e in range(e0, e1 + 1, stride):
        g.append(f'<line x1="{X(2**e):.1f}" y1="{PH-B}" x2="{X(2**e):.1f}" y2="{PH-B+5}" stroke="black"/>'
                 f'<text x="{X(2**e):.1f}" y="{PH-B+18}" text-anchor="middle">{fmt_size(2**e)}</text>')
    for v in ticks:
        g.append(f'<line x1="{L-5}" y1="{Y(v):.1f}" x2="{L}" y2="{Y(v):.1f}" stroke="black"/>'
                 f'<text x="{L-8}" y="{Y(v)+4:.1f}" text-anchor="end">{v:g}</text>')
    g.append(f'<text x="{PW/2}" y="{PH-12}" text-anchor="middle">size (bytes, log)</text>')
    g.append(f'<text x="16" y="{PH/2}" transform="rotate(-90 16 {PH/2})" text-anchor="middle">{ylabel}</text>')
    for k, (lib, lab, c, p, s) in enumerate(data):
        if not s: continue
        dash = ' stroke-dasharray="6,3"' if p == '1' and len(PLACES) > 1 else ''
        g.append(f'<polyline class="curve" data-lib="{lib}" data-inplace="{p}" fill="none" stroke="{c}" '
                 f'stroke-width="2"{dash} points="' + ' '.join(f'{X(x):.1f},{Y(y):.1f}' for x, y in sorted(s)) + '"/>')
        for x, y in s:
            g.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="2.5" fill="{c}"/>')
        key = (f'<line x1="{L+13}" y1="{T+k*18-4}" x2="{L+27}" y2="{T+k*18-4}" stroke="{c}" stroke-width="2"{dash}/>'
               if dash else f'<rect x="{L+15}" y="{T+k*18-9}" width="10" height="10" fill="{c}"/>')
        g.append(f'{key}<text x="{L+30}" y="{T+k*18}">{lab}</text>')
    g.append('</g>')
    return g

o += panel(0, 'time_us', 'time per call (us, log)', True)
o += panel(PW, 'busbw', 'bus bandwidth (GB/s)', False)
o.append('</svg>')
open(sys.argv[2], 'w').write('\n'.join(o) + '\n')

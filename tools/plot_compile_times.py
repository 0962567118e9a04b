#!/usr/bin/env python3
"""plot_compile_times.py CSV SVG -- draws tools/compile_times.sh output as a
log-log SVG (no plotting libraries needed) and prints a Markdown table."""
import csv, math, sys

rows = list(csv.DictReader(open(sys.argv[1])))
W, H, L, B, T, R = 640, 400, 70, 50, 30, 20
xs = [int(r['steps']) for r in rows]
ys = [float(r['trace_ms']) + float(r['lower_ms']) for r in rows]
vs = [float(r['verify_ms']) for r in rows]
lx0, lx1 = math.log10(min(xs)) - 0.1, math.log10(max(xs)) + 0.1
ally = ys + vs
ly0, ly1 = math.log10(max(0.05, min(ally))) - 0.2, math.log10(max(ally)) + 0.2
X = lambda x: L + (math.log10(x) - lx0) / (lx1 - lx0) * (W - L - R)
Y = lambda y: H - B - (math.log10(max(y, 0.05)) - ly0) / (ly1 - ly0) * (H - B - T)
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">baton compile: ring AllReduce, 8-64 ranks x 1-8 instances</text>',
     f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>']
for e in range(int(math.ceil(lx0)), int(math.floor(lx1)) + 1):
    o.append(f'<line x1="{X(10**e)}" y1="{H-B}" x2="{X(10**e)}" y2="{H-B+5}" stroke="black"/>'
             f'<text x="{X(10**e)}" y="{H-B+18}" text-anchor="middle">{10**e}</text>')
for e in range(int(math.ceil(ly0)), int(math.floor(ly1)) + 1):
    o.append(f'<line x1="{L-5}" y1="{Y(10**e)}" x2="{L}" y2="{Y(10**e)}" stroke="black"/>'
             f'<text x="{L-8}" y="{Y(10**e)+4}" text-anchor="end">{10**e:g}</text>')
o.append(f'<text x="{W/2}" y="{H-12}" text-anchor="middle">IR steps (log)</text>')
o.append(f'<text x="16" y="{H/2}" transform="rotate(-90 16 {H/2})" text-anchor="middle">milliseconds (log)</text>')
for pts, col, lab, yy in ((ys, '#1f77b4', 'trace + lower', 40), (vs, '#d62728', 'verify (ir_check, races, 3 CPU runs)', 58)):
    o.append(f'<polyline fill="none" stroke="{col}" points="' +
             ' '.join(f'{X(x):.1f},{Y(y):.1f}' for x, y in sorted(zip(xs, pts))) + '"/>')
    for x, y in zip(xs, pts):
        o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{col}"/>')
    o.append(f'<rect x="{L+15}" y="{yy-9}" width="10" height="10" fill="{col}"/><text x="{L+30}" y="{yy}">{lab}</text>')
o.append('</svg>')
open(sys.argv[2], 'w').write('\n'.join(o) + '\n')
print('| ranks | instances | thread blocks | steps | trace ms | lower ms | verify ms |')
print('|---:|---:|---:|---:|---:|---:|---:|')
for r in rows:
    print(f"| {r['ranks']} | {r['instances']} | {r['tbs']} | {r['steps']} | {r['trace_ms']} | {r['lower_ms']} | {r['verify_ms']} |")

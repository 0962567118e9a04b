#!/usr/bin/env python3
"""plot_compile_times.py CSV SVG [BEFORE_CSV] -- draws tools/measure/compile_times.sh
output as a log-log SVG of milliseconds against IR steps (no plotting
libraries needed) and prints a Markdown table.  Lines: the ring AllReduce's
trace + lower and its verify, the Bruck AllToAll's verify; with BEFORE_CSV
(the same script's output for an older baton) also the verify times it
measured, dashed, and the table gains its verify and total columns."""
import csv, math, sys

rows = list(csv.DictReader(open(sys.argv[1])))
before = list(csv.DictReader(open(sys.argv[3]))) if len(sys.argv) > 3 else []
key = lambda r: (r['algorithm'], r['ranks'], r['instances'])
old = {key(r): r for r in before}


def series(rs, alg, f):
    return sorted((int(r['steps']), f(r)) for r in rs if r['algorithm'] == alg)


lines = [  # points, colour, label, dashed
    (series(rows, 'allreduce_ring', lambda r: float(r['trace_ms']) + float(r['lower_ms'])), '#1f77b4',
     'ring AllReduce: trace + lower', False),
    (series(rows, 'allreduce_ring', lambda r: float(r['verify_ms'])), '#d62728',
     'ring AllReduce: verify (ir_check, races, 3 CPU runs)', False),
    (series(rows, 'alltoall_bruck', lambda r: float(r['verify_ms'])), '#ff7f0e', 'Bruck AllToAll: verify', False),
]
if before:
    lines += [(series(before, 'allreduce_ring', lambda r: float(r['verify_ms'])), '#d62728',
               'ring AllReduce: verify before', True),
              (series(before, 'alltoall_bruck', lambda r: float(r['verify_ms'])), '#ff7f0e',
               'Bruck AllToAll: verify before', True)]
lines = [l for l in lines if l[0]]
xs = [x for pts, *_ in lines for x, _ in pts]
ys = [y for pts, *_ in lines for _, y in pts]
W, H, L, B, T, R = 680, 440, 70, 50, 30, 20
lx0, lx1 = math.log10(min(xs)) - 0.1, math.log10(max(xs)) + 0.1
ly0, ly1 = math.log10(max(0.05, min(ys))) - 0.2, math.log10(max(ys)) + 0.2
X = lambda x: L + (math.log10(x) - lx0) / (lx1 - lx0) * (W - L - R)
Y = lambda y: H - B - (math.log10(max(y, 0.05)) - ly0) / (ly1 - ly0) * (H - B - T)
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="18" text-anchor="middle" font-size="14">baton compile: ring AllReduce 8-64 ranks x 1-8 '
     f'instances, Bruck AllToAll 16-128 ranks</text>',
     f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/>'
     f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>']
for e in range(int(math.ceil(lx0)), int(math.floor(lx1)) + 1):
    o.append(f'<line x1="{X(10**e)}" y1="{H-B}" x2="{X(10**e)}" y2="{H-B+5}" stroke="black"/>'
             f'<text x="{X(10**e)}" y="{H-B+18}" text-anchor="middle">{10**e}</text>')
for e in range(int(math.ceil(ly0)), int(math.floor(ly1)) + 1):
    o.append(f'<line x1="{L-5}" y1="{Y(10**e)}" x2="{L}" y2="{Y(10**e)}" stroke="black"/>'
             f'<text x="{L-8}" y="{Y(10**e)+4}" text-anchor="end">{10**e:g}</text>')
o.append(f'<text x="{W/2}" y="{H-12}" text-anchor="middle">IR steps (log)</text>')
o.append(f'<text x="16" y="{H/2}" transform="rotate(-90 16 {H/2})" text-anchor="middle">milliseconds (log)</text>')
for k, (pts, col, lab, dashed) in enumerate(lines):
    yy = 40 + 18 * k
    dash = ' stroke-dasharray="5,4"' if dashed else ''
    # The ring's points at one step count differ in instances: join them in step order.
    o.append(f'<polyline fill="none" stroke="{col}"{dash} points="' +
             ' '.join(f'{X(x):.1f},{Y(y):.1f}' for x, y in pts) + '"/>')
    for x, y in pts:
        if dashed:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="white" stroke="{col}"/>')
        else:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{col}"/>')
    o.append(f'<line x1="{L+12}" y1="{yy-4}" x2="{L+28}" y2="{yy-4}" stroke="{col}" stroke-width="2"{dash}/>'
             f'<text x="{L+34}" y="{yy}">{lab}</text>')
o.append('</svg>')
open(sys.argv[2], 'w').write('\n'.join(o) + '\n')
head = '| algorithm | ranks | instances | thread blocks | steps | trace ms | lower ms | verify ms | of it CPU runs ms | total ms |'
rule = '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
if before:
    head += ' verify ms before | total ms before |'
    rule += '---:|---:|'
print(head)
print(rule)
for r in rows:
    line = (f"| {r['algorithm']} | {r['ranks']} | {r['instances']} | {r['tbs']} | {r['steps']} | {r['trace_ms']} | "
            f"{r['lower_ms']} | {r['verify_ms']} | {r['runs_ms']} | {r['total_ms']} |")
    if before:
        b = old.get(key(r))
        line += f" {b['verify_ms']} | {b['total_ms']} |" if b else ' | |'
    print(line)

#!/usr/bin/env python3
"""plot_embed.py CSV OUT -- draws `baton bench --fused embedding_alltoall --csv`
output with matplotlib (OUT: .svg, .png or .pdf): per shape (B, T, D, mean bag,
index distribution), the times of the pooling alone, NCCL's AllToAll alone,
the layout shuffle alone, the baseline (the three in a row) and baton's fused
call as bars on a log scale; below, the ratio the run is about -- baseline
time / baton time, or pooling-alone time / baton time when no baseline ran
(--share, --no-nccl) -- with the line at 1.  Times that were not measured
(-1 in the CSV) are left out."""
import csv
import sys

if len(sys.argv) != 3:
    sys.exit('usage: plot_embed.py EMBED.csv OUT.svg|.png|.pdf')
try:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit(f'plot_embed.py: needs matplotlib, which this python3 lacks ({e}); install it (pip install matplotlib) '
             'or plot the CSV elsewhere')

try:
    rows = list(csv.DictReader(open(sys.argv[1], newline='')))
except OSError as e:
    sys.exit(f'plot_embed.py: {e}')
need = {'fused', 'dtype', 'mode', 'ranks', 'share', 'B', 'T', 'D', 'bag', 'indices', 'pool_us', 'alltoall_us',
        'shuffle_us', 'baseline_us', 'baton_us', 'speedup', 'vs_pool'}
if not rows or not need <= set(rows[0]) or rows[0]['fused'] != 'embedding_alltoall':
    sys.exit(f'plot_embed.py: {sys.argv[1]}: not a baton bench --fused embedding_alltoall CSV '
             f'(wants columns {", ".join(sorted(need))})')


def val(r, k):
    try:
        v = float(r[k])
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


BARS = (('pool_us', 'pooling alone', '#2ca02c'), ('alltoall_us', 'NCCL AllToAll alone', '#bcbd22'),
        ('shuffle_us', 'layout shuffle alone', '#ff7f0e'), ('baseline_us', 'baseline (the three in a row)', '#7f7f7f'),
        ('baton_us', 'baton fused', '#1f77b4'))
base = any(val(r, 'baseline_us') for r in rows)
bars = [b for b in BARS if any(val(r, b[0]) for r in rows)]
ratio_col, ratio_label = (('speedup', 'baseline time / baton time') if base else
                          ('vs_pool', 'pooling-alone time / baton time'))
labels = [f'B{r["B"]} T{r["T"]} D{r["D"]}\nbag {r["bag"]} {r["indices"]}' for r in rows]
r0 = rows[0]
title = (f'baton bench --fused embedding_alltoall: {r0["ranks"]} ranks, {r0["dtype"]}, {r0["mode"]}' +
         (' weighted' if r0.get('weighted', '0') not in ('0', '') else '') +
         (f', ranks sharing {r0["share"]} GPU(s)' if r0['share'] not in ('0', '') else ''))

fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(7, 1.3 * len(rows) + 3), 8), sharex=True,
                              gridspec_kw={'height_ratios': [2, 1]})
width = 0.8 / max(1, len(bars))
for k, (col, lab, color) in enumerate(bars):
    xs = [i + (k - (len(bars) - 1) / 2) * width for i, r in enumerate(rows) if val(r, col)]
    ys = [val(r, col) for r in rows if val(r, col)]
    ax.bar(xs, ys, width * 0.95, label=lab, color=color)
ax.set_yscale('log')
ax.set_ylabel('time per call (us, log)')
ax.set_title(title)
ax.legend(fontsize=8)
ax.grid(axis='y', alpha=0.3)

qs = [val(r, ratio_col) for r in rows]
ax2.bar([i for i, q in enumerate(qs) if q], [q for q in qs if q], 0.5, color='#1f77b4')
for i, q in enumerate(qs):
    if q:
        ax2.text(i, q, f'{q:.2f}', ha='center', va='bottom', fontsize=8)
ax2.axhline(1, color='#d62728', linestyle='--', linewidth=1)
ax2.set_ylabel(ratio_label)
ax2.set_xticks(range(len(rows)))
ax2.set_xticklabels(labels, fontsize=8)
ax2.grid(axis='y', alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2])
print(f'plot_embed.py: {len(rows)} shapes -> {sys.argv[2]}')

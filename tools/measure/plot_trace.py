#!/usr/bin/env python3
"""plot_trace.py -- draws the timelines BATON_TRACE=PREFIX wrote
(PREFIX.RANK.csv: runtime/rt_trace.c) as one SVG picture: a row per rank
and CUDA block (the first --blocks of each rank, 16 by default), time in
us from the first block of any rank to start; each block's setup, and
each step's wait (pale) and work (solid) as bars, a colour per step name
(its opcode and script line, or the kernel's own names), with a legend.
--own-clocks times each rank from its own first block's start instead:
every GPU keeps a clock of its own, and theirs can be tens of us apart.
Python's standard library only; the clock conversion is trace_summary.py's.
    usage: plot_trace.py PREFIX OUT.svg [--blocks N] [--title TEXT] [--own-clocks]
"""
import csv
import glob
import os
import sys
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_summary import block_steps, step_name, to_ns   # noqa: E402

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def spans(rows, per_rank, own_clocks=False):
    """(rank, block, label) rows and their (start us, end us, name, kind) bars,
    from the first start of any rank, or (own_clocks) of the bar's rank."""
    blocks, _ = to_ns(rows)
    out = []
    for rank in sorted({k[0] for k in blocks}):
        t0 = min(int(r["ns"]) for r in rows if own_clocks is False or int(r["rank"]) == rank)
        us = lambda e, t0=t0: (int(e["ns"]) - t0) / 1000.0
        for b in sorted(k[1] for k in blocks if k[0] == rank)[:per_rank]:
            evs = blocks[(rank, b)]
            start, ready, end, steps = block_steps(evs, us, us(evs[0]))
            bars = [(start, ready, "setup", "setup")]
            for e, since, at, to in steps:
                if at > since:
                    bars.append((since, at, step_name(e), "wait"))
                bars.append((at, to, step_name(e), "work"))
            if end is not None:
                bars.append((steps[-1][3] if steps else ready, end, "end", "setup"))
            out.append(((rank, b, f"rank {rank} block {b}"), bars))
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0].startswith("-"):
        sys.exit(__doc__)
    prefix, svg = args[0], args[1]
    per_rank = int(args[args.index("--blocks") + 1]) if "--blocks" in args else 16
    title = args[args.index("--title") + 1] if "--title" in args else None
    rows = []
    for path in sorted(glob.glob(prefix + ".*.csv")):
        if not path.endswith(".net.csv"):
            with open(path) as f:
                rows.extend(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_trace.py: no rows in {prefix}.*.csv")
    own = "--own-clocks" in args
    tracks = spans(rows, per_rank, own)
    end = max([b[1] for _, bars in tracks for b in bars] + [1e-3])
    names = []
    for _, bars in tracks:
        for b in bars:
            if b[3] != "setup" and b[2] not in names:
                names.append(b[2])
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    left, top, row, width = 150, 40, 14, 900
    height = top + row * len(tracks) + 40 + 16 * (len(names) + 1)
    x = lambda t: left + width * t / end
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{height}" '
           f'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="16" font-size="13">{escape(title or rows[0]["algo"])}: the last call\'s timeline, '
           f'{len({t[0][0] for t in tracks})} ranks'
           f'{", each from its own start" if own else ""}</text>']
    for i, (key, bars) in enumerate(tracks):
        y = top + i * row
        out.append(f'<text x="{left - 6}" y="{y + 10}" text-anchor="end">{escape(key[2])}</text>')
        for a, b, name, kind in bars:
            fill = "#dddddd" if kind == "setup" else colour[name]
            op = "0.35" if kind == "wait" else "1"
            out.append(f'<rect x="{x(a):.2f}" y="{y + 1}" width="{max(x(b) - x(a), 0.5):.2f}" height="{row - 3}" '
                       f'fill="{fill}" fill-opacity="{op}"><title>{escape(kind + ": " + name)} '
                       f'{a:.2f}-{b:.2f} us</title></rect>')
    axis = top + row * len(tracks) + 4
    out.append(f'<line x1="{left}" y1="{axis}" x2="{left + width}" y2="{axis}" stroke="black"/>')
    for k in range(6):
        t = end * k / 5
        out.append(f'<text x="{x(t):.1f}" y="{axis + 14}" text-anchor="middle">{t:.1f} us</text>')
    ly = axis + 34
    out.append(f'<text x="{left}" y="{ly}">grey: setup and end; pale: waiting for the step; solid: its work</text>')
    for i, n in enumerate(names):
        out.append(f'<rect x="{left}" y="{ly + 6 + 16 * i}" width="12" height="10" fill="{colour[n]}"/>'
                   f'<text x="{left + 18}" y="{ly + 15 + 16 * i}">{escape(n)}</text>')
    out.append("</svg>")
    with open(svg, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"# {len(tracks)} blocks, {end:.1f} us, written to {svg}")


if __name__ == "__main__":
    main()

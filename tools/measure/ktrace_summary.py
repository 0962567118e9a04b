#!/usr/bin/env python3
"""ktrace_summary.py -- reads the kernel timelines libbaton_ktrace.so wrote
(BATON_KTRACE=PREFIX: PREFIX.PID.csv, one per process; tools/measure/ktrace.c)
and prints, per process, stream and kernel (copies and memsets as
"memcpy" and "memset"), in us:
  n       how many ran (after the first --skip of each)
  dur     the GPU's time from its start to its end: median and mean
  gap     from the end of what ran before it on the same stream to its
          start (a launch's cost between calls: in a graph, the time
          between its nodes): median and mean
  period  from the start of the one before of the same name on the same
          stream to its start: median
Names are shortened to the function's (its template arguments dropped);
--full keeps them whole.  --chrome FILE also writes every record as a
Chrome-trace JSON file (https://ui.perfetto.dev, chrome://tracing): a
process per file, a thread per stream, each kernel, copy and memset a
span, in us from the file's first start.
    usage: ktrace_summary.py PREFIX|FILE.csv ... [--skip N] [--name TEXT] [--full] [--chrome FILE]
      --skip N     leave out the first N records of each kernel on each stream (warm-up)
      --name TEXT  only kernels whose (shortened) name holds TEXT
"""
import csv
import glob
import json
import statistics
import sys


def short(name):
    """The function's name of a mangled C++ name (_Z<len><name>...), else
    the name up to its first '(' or '<'."""
    if name.startswith("_Z"):
        i = 2
        while i < len(name) and name[i] in "LN":
            i += 1
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j > i:
            return name[j:j + int(name[i:j])]
    for stop in "(<":
        name = name.split(stop)[0]
    return name


def read(path):
    """The records of one file: dicts with name, stream, start, end (ns)."""
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            try:
                out.append({"kind": row["kind"], "name": row["name"], "stream": int(row["stream"]),
                            "start": int(row["start_ns"]), "end": int(row["end_ns"])})
            except (KeyError, ValueError) as e:
                sys.exit("ktrace_summary.py: %s: a row it cannot read (%s): %s" % (path, e, row))
    return out


def summarize(recs, skip, only, full):
    """Rows (stream, name, n, dur med, dur mean, gap med, gap mean, period
    med), times in us; gap and period None where there is no record before."""
    by_stream = {}
    for r in recs:
        by_stream.setdefault(r["stream"], []).append(r)
    rows = []
    for stream in sorted(by_stream):
        seq = sorted(by_stream[stream], key=lambda r: (r["start"], r["end"]))
        per = {}   # name -> [durations], [gaps], [periods]
        seen, last_start, prev_end = {}, {}, None
        for r in seq:
            name = r["name"] if full else short(r["name"])
            k = seen[name] = seen.get(name, 0) + 1
            gap = None if prev_end is None else r["start"] - prev_end
            period = None if name not in last_start else r["start"] - last_start[name]
            prev_end, last_start[name] = r["end"], r["start"]
            if k <= skip or (only and only not in name):
                continue
            d = per.setdefault(name, ([], [], []))
            d[0].append(r["end"] - r["start"])
            if gap is not None:
                d[1].append(gap)
            if period is not None:
                d[2].append(period)
        for name, (durs, gaps, periods) in per.items():
            us = lambda v: v / 1000.0
            rows.append((stream, name, len(durs), us(statistics.median(durs)), us(statistics.mean(durs)),
                         us(statistics.median(gaps)) if gaps else None, us(statistics.mean(gaps)) if gaps else None,
                         us(statistics.median(periods)) if periods else None))
    return rows


def chrome_events(pid, path, recs, full):
    """Chrome-trace events for one file's records: its process, a thread
    per stream, a span per record (us from the file's first start)."""
    t0 = min((r["start"] for r in recs), default=0)
    ev = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": path}}]
    for s in sorted({r["stream"] for r in recs}):
        ev.append({"ph": "M", "pid": pid, "tid": s, "name": "thread_name", "args": {"name": "stream %d" % s}})
    for r in recs:
        ev.append({"ph": "X", "pid": pid, "tid": r["stream"], "name": r["name"] if full else short(r["name"]),
                   "cat": r["kind"], "ts": (r["start"] - t0) / 1000.0, "dur": (r["end"] - r["start"]) / 1000.0})
    return ev


def main():
    args = sys.argv[1:]
    skip, only, full, paths, chrome = 0, None, False, [], None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--skip", "--name", "--chrome"):
            if i + 1 >= len(args):
                sys.exit("ktrace_summary.py: %s needs a value" % a)
            if a == "--skip":
                try:
                    skip = int(args[i + 1])
                except ValueError:
                    sys.exit("ktrace_summary.py: --skip takes a count, not %r" % args[i + 1])
                if skip < 0:
                    sys.exit("ktrace_summary.py: --skip takes a count of 0 or more")
            elif a == "--name":
                only = args[i + 1]
            else:
                chrome = args[i + 1]
            i += 2
            continue
        if a == "--full":
            full = True
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            paths += [a] if a.endswith(".csv") else sorted(glob.glob(glob.escape(a) + ".*.csv"))
        i += 1
    if not paths:
        sys.exit(__doc__ if not args else "ktrace_summary.py: no timeline found (PREFIX.PID.csv)")
    fmt = lambda v: "-" if v is None else "%.2f" % v
    events = []
    for pid, path in enumerate(paths):
        recs = read(path)
        if chrome:
            events += chrome_events(pid, path, recs, full)
        print("%s" % path)
        print("  %-8s %-40s %7s %9s %9s %9s %9s %9s" % ("stream", "name", "n", "dur_med", "dur_mean", "gap_med",
                                                         "gap_mean", "period"))
        for s, name, n, dmed, dmean, gmed, gmean, per in summarize(recs, skip, only, full):
            print("  %-8d %-40s %7d %9s %9s %9s %9s %9s" % (s, name[:40], n, fmt(dmed), fmt(dmean), fmt(gmed),
                                                             fmt(gmean), fmt(per)))
    if chrome:
        with open(chrome, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
        print("# Chrome trace written to %s" % chrome)


if __name__ == "__main__":
    main()

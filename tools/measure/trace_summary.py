#!/usr/bin/env python3
"""trace_summary.py -- reads the timelines BATON_TRACE=PREFIX wrote
(PREFIX.RANK.csv, one per rank: runtime/rt_trace.c) and prints, per rank
and CUDA block, what the last call's kernel spent its time on, in us from
the first block of any rank to start:
  start   when the block began (its GPU's launch, against the others)
  setup   start to ready: loading steps and counters
  wait/work per step (tile index:step): waiting for data, slots or
          dependencies; then the work up to the release
  end     when it left
and, from the network proxies' timelines (PREFIX.RANK.net.csv, written
where ranks talk over the network transport: transports/net_trace.c), per
rank where its proxy's time went: rounds that moved something (posting
pieces, credits, the backend's progress), idle rounds (spinning), naps;
the payload moved and its rate over the busy rounds.
--chrome FILE also writes every timeline as one Chrome-trace JSON file
(open it in https://ui.perfetto.dev or chrome://tracing): a process per
rank, a thread per CUDA block, each step's wait and work as spans named
by its opcode and where it came from (script line, else XML line); the
proxies as processes "net rank R", on their own clocks.
    usage: trace_summary.py PREFIX [--steps N] [--chrome FILE]   (N: steps shown per block, default 8)
"""
import csv
import glob
import json
import sys


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    prefix, shown, chrome = args[0], 8, None
    if "--steps" in args:
        shown = int(args[args.index("--steps") + 1])
    if "--chrome" in args:
        if args.index("--chrome") + 1 >= len(args):
            sys.exit("trace_summary.py: --chrome needs a file name")
        chrome = args[args.index("--chrome") + 1]
    rows, net = [], []
    for path in sorted(glob.glob(prefix + ".*.csv")):
        with open(path) as f:
            (net if path.endswith(".net.csv") else rows).extend(csv.DictReader(f))
    if not rows and not net:
        sys.exit(f"trace_summary.py: no rows in {prefix}.*.csv")
    if rows:
        kernels(rows, shown)
    if net:
        proxies(net)
    if chrome:
        with open(chrome, "w") as f:
            json.dump(chrome_trace(rows, net), f)
        print(f"# Chrome trace written to {chrome}")


def proxies(net):
    """Per rank: the proxy's rounds, spins and naps, and what moved."""
    print("# network proxies: times in us over each rank's timeline")
    for rank in sorted({int(r["rank"]) for r in net}):
        evs = [r for r in net if int(r["rank"]) == rank]
        span = max(int(r["at_ns"]) + int(r["dur_ns"]) for r in evs) / 1000.0
        kind = lambda k: [r for r in evs if r["event"] == k]
        busy = sum(int(r["dur_ns"]) for r in kind("round")) / 1000.0
        spin = sum(int(r["dur_ns"]) for r in kind("idle")) / 1000.0
        nap = sum(int(r["dur_ns"]) for r in kind("nap")) / 1000.0
        sent = sum(int(r["sent"]) for r in evs)
        got = sum(int(r["received"]) for r in evs)
        posted = sum(int(r["posted"]) for r in kind("round"))
        rate = (sent + got) / (busy * 1000.0) if busy > 0 else 0.0
        print(f"net rank {rank}: {span:.1f} us traced; {len(kind('round'))} rounds moved something ({busy:.1f} us, "
              f"{posted} pieces posted); {sum(int(r['rounds']) for r in kind('idle'))} idle rounds ({spin:.1f} us); "
              f"{len(kind('nap'))} naps ({nap:.1f} us); sent {sent / 1e6:.3f} MB, received {got / 1e6:.3f} MB, "
              f"{rate:.2f} GB/s over the busy rounds")


def to_ns(rows):
    """Groups the rows by (rank, block) and gives every event a time in ns:
    events between ENTER and EXIT carry SM cycles only, converted with the
    rank's cycles per ns (the median over its blocks' ENTER..EXIT spans).
    Returns the groups and the rates."""
    blocks = {}
    for r in rows:
        blocks.setdefault((int(r["rank"]), int(r["block"])), []).append(r)
    rates = {}
    for (rank, _), evs in blocks.items():
        ends = [e for e in evs if e["event"] in ("enter", "exit")]
        if len(ends) == 2:
            dns = int(ends[1]["ns"]) - int(ends[0]["ns"])
            dclk = int(ends[1]["clk"]) - int(ends[0]["clk"])
            if dns > 1000 and dclk > 0:
                rates.setdefault(rank, []).append(dclk / dns)
    rate = {rank: sorted(v)[len(v) // 2] for rank, v in rates.items()}   # the median
    for (rank, _), evs in blocks.items():
        enter = next((e for e in evs if e["event"] == "enter"), evs[0])
        for e in evs:
            if e["event"] not in ("enter", "exit"):
                e["ns"] = str(int(int(enter["ns"]) + (int(e["clk"]) - int(enter["clk"])) / rate.get(rank, 1.0)))
    return blocks, rate


def block_steps(evs, us, missing):
    """One block's timeline from its events, times in us: (start, ready,
    end, steps), start being `missing` when the block has no enter event
    (ready: start when it has no ready event; end: None without exit), and
    each step (done event, since, at, to): it waited from `since` (the
    previous step's end, or ready) to `at`, then worked until `to`."""
    byev = {}
    for e in evs:
        byev.setdefault(e["event"], []).append(e)
    start = us(byev["enter"][0]) if "enter" in byev else missing
    ready = us(byev["ready"][0]) if "ready" in byev else start
    end = us(byev["exit"][-1]) if "exit" in byev else None
    waited = {(e["tile"], e["step"]): us(e) for e in byev.get("waited", [])}
    steps, prev = [], ready
    for e in byev.get("done", []):
        at = waited.get((e["tile"], e["step"]), prev)
        steps.append((e, prev, at, us(e)))
        prev = us(e)
    return start, ready, end, steps


def step_name(e):
    """A step's name: its opcode and where it came from, else its index."""
    op, where = e.get("op") or "", e.get("where") or ""
    return (op + (" " + where if where else "")) if op else f"step {e['step']}"


def chrome_trace(rows, net):
    """Every timeline as Chrome-trace events (times in us)."""
    out = []
    if rows:
        blocks, _ = to_ns(rows)
        t0 = min(int(r["ns"]) for r in rows)
        us = lambda e: (int(e["ns"]) - t0) / 1000.0
        span = lambda name, cat, pid, tid, a, b, args: out.append(
            {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": a, "dur": max(b - a, 0.0), "args": args})
        for rank in sorted({k[0] for k in blocks}):
            out.append({"name": "process_name", "ph": "M", "pid": rank,
                        "args": {"name": f"rank {rank}: {rows[0]['algo']}"}})
        for (rank, b), evs in sorted(blocks.items()):
            out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": b,
                        "args": {"name": f"block {b} (tb {evs[0]['tb']}, lane {evs[0]['lane']})"}})
            out.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": b, "args": {"sort_index": b}})
            start, ready, _, steps = block_steps(evs, us, us(evs[0]))
            span("setup", "setup", rank, b, start, ready, {})
            for e, since, at, to in steps:
                args = {"tile": int(e["tile"]), "step": int(e["step"]), "tb": int(e["tb"])}
                if at > since:
                    span("wait: " + step_name(e), "wait", rank, b, since, at, args)
                span(step_name(e), "work", rank, b, at, to, args)
    for rank in sorted({int(r["rank"]) for r in net}):
        pid = 1000000 + rank
        out.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"net rank {rank} (own clock)"}})
        for r in (r for r in net if int(r["rank"]) == rank):
            out.append({"name": r["event"], "cat": "net", "ph": "X", "pid": pid, "tid": 0,
                        "ts": int(r["at_ns"]) / 1000.0, "dur": int(r["dur_ns"]) / 1000.0,
                        "args": {k: int(r[k]) for k in ("posted", "credits", "progress", "rounds", "sent", "received")}})
    return {"traceEvents": out, "displayTimeUnit": "ns"}


def kernels(rows, shown):
    """Per rank and CUDA block: the interpreter's last call."""
    blocks, rate = to_ns(rows)
    t0 = min(int(r["ns"]) for r in rows)
    us = lambda r: (int(r["ns"]) - t0) / 1000.0
    print(f"# {rows[0]['algo']}, {rows[0]['threads']} threads; times in us from the first start "
          f"(SM cycles per ns: " + ", ".join(f"rank {k} {v:.2f}" for k, v in sorted(rate.items())) + ")")
    for (rank, b), evs in sorted(blocks.items()):
        start, ready, end, steps = block_steps(evs, us, float("nan"))
        end = float("nan") if end is None else end
        line = f"rank {rank} block {b:3d} (tb {evs[0]['tb']}, lane {evs[0]['lane']}): start {start:7.2f} setup {ready - start:5.2f}"
        parts = [f"{e['tile']}:{e['step']} wait {at - since:.2f} work {to - at:.2f}" for e, since, at, to in steps]
        more = len(parts) - shown
        line += " | " + "; ".join(parts[:shown]) + (f"; ... {more} more" if more > 0 else "")
        line += f" | end {end:7.2f}"
        print(line)
    for rank in sorted({k[0] for k in blocks}):
        mine = [v for k, v in blocks.items() if k[0] == rank]
        st = [us(e) for v in mine for e in v if e["event"] == "enter"]
        en = [us(e) for v in mine for e in v if e["event"] == "exit"]
        print(f"rank {rank}: first start {min(st):.2f}, last start {max(st):.2f}, last end {max(en):.2f}")


if __name__ == "__main__":
    main()

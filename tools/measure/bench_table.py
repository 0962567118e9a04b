#!/usr/bin/env python3
"""bench_table.py -- a `baton bench --csv` file as the Markdown table
docs/PERFORMANCE.md uses (size, NCCL time and busbw, baton time and busbw,
ratio, wrong counts, host time per call when the CSV has it).  A CSV of
`baton bench --inplace both` gets a placement column after the size, one of
`-d all` / `-o all` (several type/redop pairs) a type/redop column first.

  tools/measure/bench_table.py ar.csv [more.csv ...]"""
import csv
import sys


def fmt(v, spec):
    return format(float(v), spec) if v not in (None, "") else "-"


def table(path):
    rows = list(csv.DictReader(open(path, newline="")))
    host = rows and "baton_host_us" in rows[0]
    both = len({r.get("inplace") or "0" for r in rows}) > 1
    combos = len({(r.get("type"), r.get("redop")) for r in rows}) > 1
    head = ("| type/redop " if combos else "") + "| size (B) |" + (" placement |" if both else "") + \
        " NCCL us | NCCL busbw GB/s | baton us | baton busbw GB/s | NCCL/baton | wrong (N/b) |"
    rule = ("|---" if combos else "") + "|---:|" + ("---|" if both else "") + "---:|---:|---:|---:|---:|---|"
    if host:
        head += " host us/call (N/b) |"
        rule += "---|"
    out = [head, rule]
    for r in rows:
        place = (" in place |" if r.get("inplace") == "1" else " out of place |") if both else ""
        combo = f"| {r['type']}/{r['redop']} " if combos else ""
        line = (f"{combo}| {int(r['size']):,} |{place} {fmt(r['nccl_time_us'], '.1f')} | {fmt(r['nccl_busbw'], '.1f')} | "
                f"{fmt(r['baton_time_us'], '.1f')} | {fmt(r['baton_busbw'], '.2f')} | {fmt(r['ratio'], '.2f')} | "
                f"{r['nccl_wrong'] or '-'}/{r['baton_wrong'] or '-'} |")
        if host:
            line += f" {fmt(r['nccl_host_us'], '.1f')}/{fmt(r['baton_host_us'], '.1f')} |"
        out.append(line)
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for i, path in enumerate(sys.argv[1:]):
        if len(sys.argv) > 2:
            print(("\n" if i else "") + f"<!-- {path} -->")
        print(table(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())

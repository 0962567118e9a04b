#!/usr/bin/env python3
"""sim_calibrate.py -- `baton sim`'s predictions against a measured bench.

Usage: tools/measure/sim_calibrate.py [--csv OUT] [--only fifo|direct] [--summary] BATON SPEC PROGRAM_DIR CSV [CSV...]

Each CSV is a `baton bench --csv` file (docs/PERFORMANCE.md).  For every
row the program the measured call ran (its `algorithm` column, an IR name)
is looked up in PROGRAM_DIR and simulated at the row's size, type and
placement on the system SPEC describes.  Prints a Markdown table, measured
against predicted, and how many rows meet the target (within 15% where the
measured time is above 20 us, within 3 us below).  --csv OUT writes the
rows as CSV too (collective, program, bytes, measured_us, predicted_us),
for tools/measure/plot_ratio.py.  --only keeps the rows of FIFO programs
(or of direct ones).  --summary prints, after the rows, a line per
(collective, program): its rows, how many meet the target, predicted /
measured above 20 us and predicted - measured below.  Exit status 0
when at least one row was simulated, 2 on bad usage or when none was.

A CSV that --csv wrote before (collective, program, bytes, measured_us)
is taken as it stands: each row's program, a file of PROGRAM_DIR, is
simulated at its size in f32 and in the program's own placement, so that
an earlier comparison can be predicted again on another SPEC.

Among the programs of a name, the one whose size range holds the row's
size is taken (the runtime's choice); where none does (a CSV of a set
whose ranges have moved since), the one of that name nearest in range,
said on stderr.  NAME_oop, the runtime's out-of-place rewrite of an
in-place program NAME, is NAME simulated out of place (the same steps);
an out-of-place program in an in-place row is simulated out of place too
(said on stderr: the runtime ran its steps as they are, or after a copy
of the input that the model leaves out).
"""
import collections
import csv
import glob
import os
import re
import subprocess
import sys
import tempfile


def names(folder):
    """IR name -> [(minBytes, maxBytes or None, file, direct, out of place)]: a name may have a program per size
    range."""
    found = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(folder, '*.xml'))):
        with open(f, encoding='utf-8', errors='replace') as h:
            head = re.search(r'<algo[^>]*>', h.read(4096))
        if not head:
            continue
        attr = dict(re.findall(r'(\w+)="([^"]*)"', head.group(0)))
        found[attr.get('name', '')].append((int(attr.get('minBytes', 0)), int(attr['maxBytes']) if 'maxBytes' in attr
                                            and int(attr['maxBytes']) else None, f,
                                            attr.get('proto', '').startswith('baton-'), attr.get('inplace') == '0'))
    return found


def pick(progs, name, size):
    """(file, direct, out of place, in its range) of the program of that name whose size range holds size (the runtime's
    choice among them), else of the one nearest in range; None when there is none of that name."""
    if name not in progs and name.endswith('_oop'):
        name = name[:-4]   # the runtime's rewrite: the same steps, run out of place
    cands = progs.get(name, [])
    for lo, hi, f, direct, oop in cands:
        if size >= lo and (hi is None or size <= hi):
            return f, direct, oop, True
    if not cands:
        return None
    lo, hi, f, direct, oop = min(cands, key=lambda c: c[0] - size if size < c[0] else size - c[1])
    return f, direct, oop, False


def meets(measured, predicted):
    """The target: within 15% where the measured time is above 20 us, within 3 us below."""
    return abs(predicted - measured) <= (0.15 * measured if measured > 20 else 3)


def simulate(baton, spec, prog, sizes, dtype, inplace):
    """size -> predicted microseconds."""
    with tempfile.NamedTemporaryFile(suffix='.csv') as out:
        cmd = [baton, 'sim', prog, '--system', spec, '--sizes', ','.join(str(s) for s in sizes), '-d', dtype, '-q',
               '--csv', out.name] + ([] if inplace is None else ['--inplace' if inplace else '--outofplace'])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(f'{prog}: {r.stderr.strip()}\n')
            return {}
        return {int(row['bytes']): float(row['time_us']) for row in csv.DictReader(open(out.name))}


def main(argv):
    out = only = None
    summary = False
    while len(argv) > 1 and argv[1] == '--summary' or len(argv) > 2 and argv[1] in ('--csv', '--only'):
        if argv[1] == '--summary':
            summary = True
            argv = argv[:1] + argv[2:]
            continue
        if argv[1] == '--csv':
            out = csv.writer(open(argv[2], 'w', newline=''))
            out.writerow(['collective', 'program', 'bytes', 'measured_us', 'predicted_us'])
        elif argv[2] in ('fifo', 'direct'):
            only = argv[2]
        else:
            sys.stderr.write(f'--only {argv[2]}: fifo or direct\n')
            return 2
        argv = argv[:1] + argv[3:]
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    baton, spec, folder, files = argv[1], argv[2], argv[3], argv[4:]
    progs = names(folder)
    rows = [r for f in files for r in csv.DictReader(open(f))]
    again = [r for r in rows if 'measured_us' in r]   # an earlier comparison's rows
    rows = [r for r in rows if 'measured_us' not in r]
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r['algorithm'], r['type'], r['inplace'] == '1')].append(r)
    print('| collective | algorithm | bytes | measured us | predicted us | predicted / measured | target |')
    print('|---|---|---:|---:|---:|---:|---|')
    per = collections.defaultdict(list)   # (collective, program) -> [(measured, predicted)]

    def row(coll, prog, size, meas, p):
        """One compared row: printed, kept for the summary, written to --csv."""
        per[(coll, prog)].append((meas, p))
        print(f"| {coll} | {prog} | {size} | {meas:.2f} | {p:.2f} | {p / meas:.2f} | {'yes' if meets(meas, p) else 'no'} |")
        if out:
            out.writerow([coll, prog, size, f'{meas:.3f}', f'{p:.3f}'])

    byfile = collections.defaultdict(list)
    for r in again:
        byfile[os.path.join(folder, r['program'])].append(r)
    for f, frs in sorted(byfile.items()):
        pred = simulate(baton, spec, f, sorted({int(r['bytes']) for r in frs}), 'f32', None)
        for r in sorted(frs, key=lambda r: int(r['bytes'])):
            size, meas = int(r['bytes']), float(r['measured_us'])
            if size in pred and meas > 0:
                row(r['collective'], r['program'], size, meas, pred[size])
    for (alg, dtype, inplace), rs in sorted(groups.items(), key=lambda g: (g[1][0]['collective'], g[0][0])):
        byprog = collections.defaultdict(list)
        oop_of = {}   # file -> written out of place
        for r in rs:
            got = pick(progs, alg, int(r['size']))
            if not got:
                sys.stderr.write(f"{alg} at {r['size']} bytes: no such program in {folder}\n")
                continue
            f, direct, oop, held = got
            oop_of[f] = oop
            if only and direct != (only == 'direct'):
                continue
            if not held:
                sys.stderr.write(f"{alg} at {r['size']} bytes: outside the size range of {os.path.basename(f)}, "
                                 f"simulated with it\n")
            byprog[f].append(r)
        pred = {}
        for f, frs in byprog.items():
            # An out-of-place program in an in-place row: the runtime ran it
            # as it is (an AllToAll race-free in place) or on a copy of the
            # input made before it (which the model leaves out): its steps.
            as_is = inplace and oop_of[f]
            if as_is:
                sys.stderr.write(f'{os.path.basename(f)}: in-place rows of an out-of-place program, simulated out of '
                                 f'place (a copy of the input before it, where the runtime made one, is not in the model)\n')
            for size, t in simulate(baton, spec, f, sorted({int(r['size']) for r in frs}), dtype,
                                    inplace and not as_is).items():
                pred[(f, size)] = t
        for f, frs in sorted(byprog.items()):
            for r in sorted(frs, key=lambda r: int(r['size'])):
                size, meas = int(r['size']), float(r['baton_time_us'])
                if (f, size) in pred and meas > 0:
                    row(r['collective'], os.path.basename(f), size, meas, pred[(f, size)])
    pairs = [mp for v in per.values() for mp in v]
    met, total = sum(meets(m, p) for m, p in pairs), len(pairs)
    print(f'\n{met} of {total} rows meet the target.')
    if summary:
        print_summary(per)
    return 0 if total else 2


def span(values, fmt):
    """'a .. b' of the values (one value alone), '' for none."""
    if not values:
        return ''
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f'{fmt.format(lo)} .. {fmt.format(hi)}'


def print_summary(per):
    """A line per (collective, program): rows, rows meeting the target, predicted / measured above 20 us, predicted -
    measured (us) below."""
    print('\n| collective | program | rows | meet the target | above 20 us: predicted / measured '
          '| below: predicted - measured, us |')
    print('|---|---|---:|---:|---|---|')
    for (coll, prog), pairs in sorted(per.items()):
        ok = sum(meets(m, p) for m, p in pairs)
        above = [p / m for m, p in pairs if m > 20]
        below = [p - m for m, p in pairs if m <= 20]
        print(f'| {coll} | {prog} | {len(pairs)} | {ok} | {span(above, "{:.2f}")} | {span(below, "{:+.1f}")} |')


if __name__ == '__main__':
    sys.exit(main(sys.argv))

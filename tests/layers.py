"""layers.py -- the tree keeps the shape docs/ARCHITECTURE.md gives it.

Usage: python3 tests/layers.py SOURCE_ROOT LIBRARY.a...

- Every folder holding C or CUDA sources is a row of ARCHITECTURE.md's
  folder table, every row a folder of the tree, and a file includes only from its own folder or from a
  folder of an earlier row (the rows are the floors, lowest first; tests/
  may include anything).
- No two object files of the libraries given call into each other, however
  long the circle (a file uses a symbol another defines: nm).
- No source file is over 1,000 lines.
"""
import collections
import os
import re
import subprocess
import sys

import tap

SOURCES = re.compile(r'\.(c|h|cu|cuh|def)$')
MAX_LINES = 1000
FREE = ('tests', 'tests/fuzz')   # the tests include from every floor


def table_rows(root):
    """The folders of ARCHITECTURE.md's table, in order."""
    text = open(os.path.join(root, 'docs', 'ARCHITECTURE.md'), encoding='utf-8').read()
    part = text.split('## Folders', 1)[1].split('\n## ', 1)[0]
    return [m.group(1).rstrip('/') for m in re.finditer(r'^\| `([^`]+)/` \|', part, re.M)]


def sources(root):
    """The C and CUDA sources: git's list, else the tree without build folders and hidden ones."""
    git = subprocess.run(['git', '-C', root, 'ls-files'], capture_output=True, text=True)
    if git.returncode == 0 and git.stdout:
        return [f for f in git.stdout.split() if SOURCES.search(f)]
    found = []
    for d, subs, names in os.walk(root):
        subs[:] = [s for s in subs if not s.startswith(('.', 'build'))]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names if SOURCES.search(n)]
    return found


def include_edges(root, files):
    """(from folder, to folder, file, header) for each include of a header of another folder."""
    where = collections.defaultdict(list)
    for f in files:
        where[os.path.basename(f)].append(os.path.dirname(f))
    for f in files:
        here = os.path.dirname(f)
        text = open(os.path.join(root, f), encoding='utf-8', errors='replace').read()
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            name = os.path.basename(m.group(1))
            dirs = where.get(name)
            if not dirs or here in dirs:
                continue
            yield here, dirs[0], f, name


def symbol_graph(archives):
    """Object -> the objects whose symbols it uses, over every archive given."""
    defs, uses = collections.defaultdict(set), collections.defaultdict(set)
    for a in archives:
        out = subprocess.run(['nm', '-A', '-P', a], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            m = re.match(r'^(\S+?)(?:\[(\S+)\])?: (\S+) ([A-Za-z])', line)
            if not m:
                continue
            obj = os.path.basename(m.group(2) or m.group(1))
            obj = re.sub(r'\.(c|cu)\.o$|\.o$', '', obj)   # (a source of another folder: '.._transports_tp')
            sym, kind = m.group(3), m.group(4)
            if kind in 'TDBRC':
                defs[sym].add(obj)
            elif kind == 'U':
                uses[obj].add(sym)
    graph = collections.defaultdict(set)
    for obj, syms in uses.items():
        for s in syms:
            for d in defs.get(s, ()):
                if d != obj:
                    graph[obj].add(d)
    return graph


def circles(graph):
    """The strongly connected sets of more than one object (Tarjan, without recursion)."""
    index, low, on, stack, found, n = {}, {}, set(), [], [], 0
    for start in list(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = n
        n += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def main():
    root, archives = sys.argv[1], sys.argv[2:]
    rows = table_rows(root)
    rank = {d: i for i, d in enumerate(rows)}
    files = sources(root)
    folders = sorted({os.path.dirname(f) for f in files})
    missing = [d for d in folders if d not in rank]
    tap.ok(rows and not missing, f'ARCHITECTURE.md has a row for every source folder ({len(rows)} rows)' +
           (f'; missing: {", ".join(missing)}' if missing else ''))
    gone = [d for d in rows if not os.path.isdir(os.path.join(root, d))]
    tap.ok(not gone, 'every folder of the table exists' + (f'; not in the tree: {", ".join(gone)}' if gone else ''))
    upward = [f'{f} includes {h} from {to}/' for here, to, f, h in include_edges(root, files)
              if here not in FREE and here in rank and to in rank and rank[to] > rank[here]]
    tap.ok(not upward, 'every include goes to the same floor or a lower one' +
           (': ' + '; '.join(upward[:8]) if upward else ''))
    long = [f'{f} ({n} lines)' for f in files if not f.startswith('tests/fuzz/regress')
            for n in [sum(1 for _ in open(os.path.join(root, f), 'rb'))] if n > MAX_LINES]
    tap.ok(not long, f'no source file over {MAX_LINES} lines' + (': ' + ', '.join(long) if long else ''))
    found = circles(symbol_graph(archives))
    tap.ok(archives and not found, f'no circle of calls between the files of {len(archives)} libraries' +
           (': ' + '; '.join(' <-> '.join(c) for c in found) if found else ''))
    tap.done()


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""The embedding-bag opcode alone against PyTorch's F.embedding_bag on one
GPU: a one-rank embedding-bag + AllToAll program (its output is the pooled
[B, T*D] itself) and F.embedding_bag over the same tables concatenated into
one call, side by side in one run, both replayed from CUDA graphs.  Rates
are gathered rows (lookups x D x element size) per second.  The output is
checked against PyTorch's on every shape.

    BATON_ALGO_DIR=DIR python3 tools/measure/torch_embed.py [--quick | --full | --shapes 'B,T,D;...'] [--csv FILE]

DIR holds the programs for 1 rank (tools/measure/gpu_prep.sh ... 1 OUT: OUT/default).
"""
import argparse, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
import torch
import torch.nn.functional as F
import baton
from torch_util import timed

ap = argparse.ArgumentParser()
ap.add_argument('--quick', action='store_true')
ap.add_argument('--full', action='store_true', help='every B x T x D of the issue grid, bag means 30-70')
ap.add_argument('--shapes', default=None, help="'B,T,D;...' instead of the grid")
ap.add_argument('--csv', default=None)
ap.add_argument('--reps', type=int, default=20)
ap.add_argument('--lib', default=None)
a = ap.parse_args()
baton.load(a.lib)
comm = baton.Comm.init_all([0])[0]
dev = 'cuda:0'
TABLE_BYTES = 2 << 30   # all of one shape's tables together, at most


def bags(B, T, rows, bag, skew, g):
    sizes = torch.randint(0, 2 * bag + 1, (B * T,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    table_of = torch.arange(B * T).remainder(T).repeat_interleave(sizes)
    u = torch.rand(int(offsets[-1]), generator=g, dtype=torch.float64)
    if skew:   # Zipf-like: most lookups among a table's first rows
        u = u ** 4
    r = (u * rows).long().clamp_(max=rows - 1)
    return (r + table_of * rows).to(dev), offsets.to(dev)


shapes = []
for D in (64, 128, 256):
    for T in (16, 64, 256):
        shapes.append((2048, T, D))
for B in (512, 1024, 4096):
    shapes.append((B, 64, 128))
if a.quick:
    shapes = [(2048, 64, 128), (2048, 16, 64), (2048, 16, 256), (512, 64, 128)]
if a.full:   # B {512..4096} x T {16, 64, 256} x D {64, 128, 256}
    shapes = [(B, T, D) for B in (512, 1024, 2048, 4096) for T in (16, 64, 256) for D in (64, 128, 256)]
if a.shapes:
    shapes = [tuple(int(v) for v in x.split(',')) for x in a.shapes.split(';')]
bag_of = {}   # mean bag size per shape: 50, or (--full) seeded over 30-70
for k, sh in enumerate(shapes):
    bag_of[sh] = 30 + (k * 17) % 41 if a.full else 50
rows_out = []
print(f'{"dtype":5} {"indices":9} {"B":>5} {"T":>4} {"D":>4} {"lookups":>9} | {"torch us":>9} {"TB/s":>5} | '
      f'{"baton us":>9} {"TB/s":>5} | {"ratio":>5} {"maxerr":>8}  program')
g = torch.Generator().manual_seed(7)
for dt_name, dt in (('f32', torch.float32), ('bf16', torch.bfloat16)):
    for (B, T, D) in shapes:
        es = torch.finfo(dt).bits // 8
        rows = max(1000, min(100000, TABLE_BYTES // (T * D * es)))
        E = torch.randn(T * rows, D, generator=g).to(dt).to(dev)
        # sum over uniform and skewed indices; mean and weighted sums on the reference shape
        variants = [(0, 'sum', False), (1, 'sum', False)]
        if (B, T, D) == (2048, 64, 128):
            variants += [(0, 'mean', False), (0, 'sum', True)]
        for skew, mode, weighted in variants:
            I, O = bags(B, T, rows, bag_of[(B, T, D)], skew, g)
            w = torch.rand(I.shape[0], generator=g).to(dt).to(dev) if weighted else None
            out = torch.empty(B, T * D, dtype=dt, device=dev)
            ref = [None]
            def torch_call():
                ref[0] = F.embedding_bag(I, E, O, mode=mode, per_sample_weights=w, include_last_offset=True)
            def baton_call():
                baton.embedding_alltoall(E, I, O, B, T, weights=w, mode=mode, out=out, comm=comm)
            t_torch = timed(torch, torch_call, a.reps, True)
            t_baton = timed(torch, baton_call, a.reps, True)
            out.fill_(float('nan'))   # a call after the replays must still compute every bag
            baton_call()
            torch.cuda.synchronize()
            err = float((out.float() - ref[0].view(B, T * D).float()).abs().max())
            gathered = I.shape[0] * D * es
            rt, rb = gathered / t_torch / 1e6, gathered / t_baton / 1e6
            kind = ('zipf' if skew else 'unif') + ('' if mode == 'sum' and not weighted else '/mean' if mode == 'mean' else '/w')
            print(f'{dt_name:5} {kind:9} {B:5} {T:4} {D:4} {I.shape[0]:9} | {t_torch:9.1f} {rt:5.2f} | '
                  f'{t_baton:9.1f} {rb:5.2f} | {t_torch / t_baton:5.2f} {err:8.2g}  {comm.last_algorithm()}', flush=True)
            rows_out.append((dt_name, kind, B, T, D, I.shape[0], t_torch, t_baton, err))
            del I, O, out, ref, w
        del E
        torch.cuda.empty_cache()
if a.csv:
    with open(a.csv, 'w') as f:
        f.write('dtype,indices,B,T,D,lookups,torch_us,baton_us,max_err\n')
        for r in rows_out:
            f.write(','.join(str(x) for x in r) + '\n')
comm.destroy()

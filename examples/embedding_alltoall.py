#!/usr/bin/env python3
"""Fused embedding bags + AllToAll from PyTorch (the sparse layer of a
recommendation model with model-parallel tables): every rank holds T tables
of D columns, pools them for the whole global batch, and gets, for each of
its B/n samples, the pooled vectors of every rank's tables: out [B/n, n*T*D].
One process may drive every rank (ranks may share a GPU: --gpus 1):

    BATON_ALGO_DIR=DIR python3 examples/embedding_alltoall.py --ranks 4 --gpus 1 --B 2048 --T 16 --D 128

or a process per GPU under torchrun, the calls captured into a CUDA graph
with --graph (then each rank's pooled rows go straight into their owners'
outputs across processes):

    BATON_ALGO_DIR=DIR torchrun --nproc-per-node 4 examples/embedding_alltoall.py --B 2048 --T 16 --D 128 --graph

DIR holds the fused programs compiled for that many ranks (tools/measure/gpu_prep.sh
--fused ... N OUT puts them in OUT/fused/).  Prints the program baton ran,
the largest error against PyTorch (F.embedding_bag per rank, then the
exchange -- tensor copies in one process, dist.all_to_all_single with a
process per GPU -- and the layout) and the time per call of both.
"""
import argparse

import torch.nn.functional as F

from ranks import Ranks, baton, torch

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2, help='ranks, one process (under torchrun: WORLD_SIZE)')
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--B', type=int, default=1024, help='global batch')
ap.add_argument('--T', type=int, default=16, help='tables per rank')
ap.add_argument('--D', type=int, default=128, help='columns of a table')
ap.add_argument('--rows', type=int, default=100000, help='rows of a table')
ap.add_argument('--bag', type=int, default=50, help='mean lookups per bag')
ap.add_argument('--mode', default='sum', choices=['sum', 'mean'])
ap.add_argument('--dtype', default='f32', choices=['bf16', 'f16', 'f32'])
ap.add_argument('--graph', action='store_true', help='time replays of a CUDA graph (a process per GPU)')
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[a.dtype]
R = Ranks(a.ranks, a.gpus, a.lib)
n = R.n
if a.graph and not R.procs:
    raise SystemExit('--graph: run a process per GPU (torchrun --nproc-per-node N ...)')
if a.B % n:
    raise SystemExit(f'--B must be a multiple of the {n} ranks')
per = a.B // n

E, I, O = {}, {}, {}
for r in R.mine:   # bag s*T + t: table t of sample s, its rows offset into the stacked table; rank r's own seed
    g = torch.Generator().manual_seed(1000 + r)
    sizes = torch.randint(0, 2 * a.bag + 1, (a.B * a.T,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    table_of = torch.arange(a.B * a.T).remainder(a.T).repeat_interleave(sizes)
    rows = torch.randint(0, a.rows, (int(offsets[-1]),), generator=g) + table_of * a.rows
    E[r] = torch.randn(a.T * a.rows, a.D, generator=g).to(dtype).to(R.device(r))
    I[r] = rows.to(R.device(r))
    O[r] = offsets.to(R.device(r))
out = {r: torch.empty(per, n * a.T * a.D, dtype=dtype, device=R.device(r)) for r in R.mine}


def fused():
    R.call(lambda r, s: baton.embedding_alltoall(E[r], I[r], O[r], a.B, a.T, mode=a.mode, out=out[r], comm=R.comm[r],
                                                 stream=s))


def pooled(r):
    return F.embedding_bag(I[r], E[r], O[r], mode=a.mode, include_last_offset=True).view(a.B, a.T * a.D)


if R.procs:   # PyTorch: pool, all_to_all_single, then the layout [B/n, n*T*D]
    r0 = R.mine[0]
    recv = torch.empty(n, per, a.T * a.D, dtype=dtype, device=R.device(r0))
    ref = {r0: torch.empty_like(out[r0])}

    def reference():
        R.dist.all_to_all_single(recv, pooled(r0).view(n, per, a.T * a.D))
        ref[r0].view(per, n, a.T * a.D).copy_(recv.transpose(0, 1))
        return ref
else:
    def reference():
        p = {r: pooled(r) for r in R.mine}
        return {q: torch.cat([p[r][q * per:(q + 1) * per].to(R.device(q)) for r in R.mine], dim=1) for q in R.mine}

fused()
R.sync()
want = reference()
R.sync()
err = R.most(max(float((out[q].float() - want[q].float()).abs().max()) for q in R.mine))
how = 'CUDA graph replays' if a.graph else 'eager calls, host launch costs included'
t_fused, t_ref = R.timed(fused, a.graph, 10), R.timed(reference, a.graph, 10)
R.say(f'{R.comm[R.mine[0]].last_algorithm()}: {R.where()}, B={a.B} T={a.T} D={a.D} {a.dtype} {a.mode}: '
      f'max |baton - torch| = {err:.3g}; per call ({how}): baton {t_fused:.1f} us, torch (embedding_bag + exchange) '
      f'{t_ref:.1f} us')
raise SystemExit(R.end(err <= 1e-2 * max(1.0, a.bag ** 0.5)))

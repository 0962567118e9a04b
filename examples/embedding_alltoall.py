#!/usr/bin/env python3
"""Fused embedding bags + AllToAll from PyTorch (the sparse layer of a
recommendation model with model-parallel tables): every rank holds T tables
of D columns, pools them for the whole global batch, and gets, for each of
its B/n samples, the pooled vectors of every rank's tables: out [B/n, n*T*D].
One process drives every rank here (ranks may share a GPU: --gpus 1); with
one process per GPU, make each rank's communicator with baton.Comm.init_rank.

    BATON_ALGO_DIR=DIR python3 examples/embedding_alltoall.py --ranks 4 --gpus 1 --B 2048 --T 16 --D 128

DIR holds the fused programs compiled for that many ranks (tools/measure/gpu_prep.sh
puts them in OUT/default/).  Prints the program baton ran, the largest error
against PyTorch (F.embedding_bag per rank, then the exchange and the layout
done with tensor copies) and the times of both, per call.
"""
import argparse, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch
import torch.nn.functional as F
import baton

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2)
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--B', type=int, default=1024, help='global batch')
ap.add_argument('--T', type=int, default=16, help='tables per rank')
ap.add_argument('--D', type=int, default=128, help='columns of a table')
ap.add_argument('--rows', type=int, default=100000, help='rows of a table')
ap.add_argument('--bag', type=int, default=50, help='mean lookups per bag')
ap.add_argument('--mode', default='sum', choices=['sum', 'mean'])
ap.add_argument('--dtype', default='f32', choices=['bf16', 'f16', 'f32'])
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[a.dtype]
gpus = a.gpus or a.ranks
n = a.ranks
baton.load(a.lib)

devices = [r % gpus for r in range(n)]
comms = baton.Comm.init_all(devices)
g = torch.Generator().manual_seed(1)
E, I, O = [], [], []
for d in devices:   # bag s*T + t: table t of sample s, its rows offset into the stacked table
    sizes = torch.randint(0, 2 * a.bag + 1, (a.B * a.T,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    table_of = torch.arange(a.B * a.T).remainder(a.T).repeat_interleave(sizes)
    rows = torch.randint(0, a.rows, (int(offsets[-1]),), generator=g) + table_of * a.rows
    E.append(torch.randn(a.T * a.rows, a.D, generator=g).to(dtype).to(f'cuda:{d}'))
    I.append(rows.to(f'cuda:{d}'))
    O.append(offsets.to(f'cuda:{d}'))
out = [torch.empty(a.B // n, n * a.T * a.D, dtype=dtype, device=f'cuda:{d}') for d in devices]
streams = [torch.cuda.Stream(device=d) for d in devices]   # ranks sharing a GPU wait for each other in the kernel

def fused():
    with baton.group():
        for r in range(n):
            baton.embedding_alltoall(E[r], I[r], O[r], a.B, a.T, mode=a.mode, out=out[r], comm=comms[r],
                                     stream=streams[r])

def reference():
    pooled = [F.embedding_bag(I[r], E[r], O[r], mode=a.mode, include_last_offset=True).view(a.B, a.T * a.D)
              for r in range(n)]
    per = a.B // n
    return [torch.cat([pooled[r][q * per:(q + 1) * per].to(f'cuda:{devices[q]}') for r in range(n)], dim=1)
            for q in range(n)]

def timed(fn, reps=10):
    fn()
    for d in set(devices): torch.cuda.synchronize(d)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps): fn()
    for d in set(devices): torch.cuda.synchronize(d)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps * 1e3

t_fused = timed(fused)
want = reference()
err = max(float((out[q].float() - want[q].float()).abs().max()) for q in range(n))
t_ref = timed(reference)
print(f'{comms[0].last_algorithm()}: {n} ranks on {gpus} GPU(s), B={a.B} T={a.T} D={a.D} {a.dtype} {a.mode}: '
      f'max |baton - torch| = {err:.3g}; baton {t_fused:.1f} us, torch (embedding_bag + exchange) {t_ref:.1f} us per call')
for c in comms:
    c.destroy()
sys.exit(0 if err <= 1e-2 * max(1.0, a.bag ** 0.5) else 1)

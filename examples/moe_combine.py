#!/usr/bin/env python3
"""Fused expert GEMM + AllToAll from PyTorch (the combine of a
mixture-of-experts layer, one expert per rank): every rank holds the tokens
routed to its expert, X [T, F] in n blocks of T/n rows (block q: rank q's
tokens, as a dispatch AllToAll leaves them), and the expert's weight
W [F, H]; rank q gets back its tokens' outputs from every expert:
out [T, H], block p from expert p.  The router rarely fills every block:
--fill F makes block q of each expert hold about F*T/n tokens (the rest is
padding), passed as the device-side counts baton skips the padding by.
One process drives every rank here (ranks may share a GPU: --gpus 1); with
one process per GPU, make each rank's communicator with baton.Comm.init_rank.

    BATON_ALGO_DIR=DIR python3 examples/moe_combine.py --ranks 4 --gpus 1 --T 4096 --H 4096 --F 2048 --fill 0.7

DIR holds the programs compiled for that many ranks (baton compile
algorithms/moe_combine.lua --param ranks=N -o DIR/moe_combine_Nr.xml, or
tools/measure/gpu_prep.sh's default set).  Prints the program baton ran, the largest
error against PyTorch (torch.matmul per rank, then the exchange with tensor
copies) on the rows that are tokens, and the times of both, per call.
"""
import argparse, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch
import baton

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2)
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--T', type=int, default=2048, help='token capacity of an expert (T/n from each rank)')
ap.add_argument('--H', type=int, default=4096, help='output columns (a multiple of 64)')
ap.add_argument('--F', type=int, default=2048, help='input columns (a multiple of 64)')
ap.add_argument('--fill', type=float, default=1.0, help='share of each block that is tokens (the rest padding)')
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
n, gpus = a.ranks, a.gpus or a.ranks
if a.T % n or not 0.0 < a.fill <= 1.0:
    sys.exit('T must be a multiple of the ranks, and --fill in (0, 1]')
per = a.T // n
baton.load(a.lib)

devices = [r % gpus for r in range(n)]
comms = baton.Comm.init_all(devices)
g = torch.Generator().manual_seed(1)
X, W, counts, cnt = [], [], [], []
for d in devices:
    X.append((torch.rand(a.T, a.F, generator=g) * 2 - 1).to(torch.bfloat16).to(f'cuda:{d}'))
    W.append(((torch.rand(a.F, a.H, generator=g) * 2 - 1) / a.F ** 0.5).to(torch.bfloat16).to(f'cuda:{d}'))
    c = torch.clamp((torch.rand(n, generator=g) * 0.4 + a.fill - 0.2) * per, 0, per).to(torch.int32)
    cnt.append(c)
    counts.append(c.to(f'cuda:{d}'))
out = [torch.empty(a.T, a.H, dtype=torch.bfloat16, device=f'cuda:{d}') for d in devices]
streams = [torch.cuda.Stream(device=d) for d in devices]   # ranks sharing a GPU wait for each other in the kernel


def fused():
    with baton.group():
        for r in range(n):
            baton.gemm_alltoall(X[r], W[r], out=out[r], comm=comms[r], stream=streams[r],
                                counts=counts[r] if a.fill < 1.0 else None)


def reference():
    Y = [X[r] @ W[r] for r in range(n)]
    return [torch.cat([Y[p][q * per:(q + 1) * per].to(f'cuda:{devices[q]}') for p in range(n)]) for q in range(n)]


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
err = 0.0
for q in range(n):   # block p of rank q's out: the first cnt[p][q] rows are tokens (expert p's count for rank q)
    for p in range(n):
        k = int(cnt[p][q]) if a.fill < 1.0 else per
        got, ref = out[q][p * per:p * per + k].float(), want[q][p * per:p * per + k].float()
        if k:
            err = max(err, float(((got - ref).abs() / (ref.abs() + 1)).max()))
t_ref = timed(reference)
tokens = sum(int(c.sum()) for c in cnt) if a.fill < 1.0 else n * a.T
print(f'{comms[0].last_algorithm()}: {n} ranks on {gpus} GPU(s), T={a.T} H={a.H} F={a.F}, {tokens} of {n * a.T} '
      f'rows tokens: max relative |baton - torch| = {err:.3g}; baton {t_fused:.1f} us, torch (matmul + exchange) '
      f'{t_ref:.1f} us per call')
for c in comms:
    c.destroy()
sys.exit(0 if err <= 2 ** -6 else 1)

#!/usr/bin/env python3
"""Fused expert GEMM + AllToAll from PyTorch (the combine of a
mixture-of-experts layer, one expert per rank): every rank holds the tokens
routed to its expert, X [T, F] in n blocks of T/n rows (block q: rank q's
tokens, as a dispatch AllToAll leaves them), and the expert's weight
W [F, H]; rank q gets back its tokens' outputs from every expert:
out [T, H], block p from expert p.  The router rarely fills every block:
--fill F makes block q of each expert hold about F*T/n tokens (the rest is
padding), passed as the device-side counts baton skips the padding by.
One process may drive every rank (ranks may share a GPU: --gpus 1):

    BATON_ALGO_DIR=DIR python3 examples/moe_combine.py --ranks 4 --gpus 1 --T 4096 --H 4096 --F 2048 --fill 0.7

or a process per GPU under torchrun, the calls captured into a CUDA graph
with --graph (then each expert's rows go straight into their owners'
outputs across processes):

    BATON_ALGO_DIR=DIR torchrun --nproc-per-node 4 examples/moe_combine.py --T 4096 --H 4096 --F 2048 --graph

DIR holds the programs compiled for that many ranks (baton compile
algorithms/moe_combine.lua --param ranks=N -o DIR/moe_combine_Nr.xml, or
tools/measure/gpu_prep.sh's default set).  Prints the program baton ran, the largest
error against PyTorch (torch.matmul per rank, then the exchange: tensor
copies in one process, dist.all_to_all_single with a process per GPU) on
the rows that are tokens, and the time per call of both.
"""
import argparse

from ranks import Ranks, baton, torch

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2, help='ranks, one process (under torchrun: WORLD_SIZE)')
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--T', type=int, default=2048, help='token capacity of an expert (T/n from each rank)')
ap.add_argument('--H', type=int, default=4096, help='output columns (a multiple of 64)')
ap.add_argument('--F', type=int, default=2048, help='input columns (a multiple of 64)')
ap.add_argument('--fill', type=float, default=1.0, help='share of each block that is tokens (the rest padding)')
ap.add_argument('--graph', action='store_true', help='time replays of a CUDA graph (a process per GPU)')
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
R = Ranks(a.ranks, a.gpus, a.lib)
n = R.n
if a.graph and not R.procs:
    raise SystemExit('--graph: run a process per GPU (torchrun --nproc-per-node N ...)')
if a.T % n or not 0.0 < a.fill <= 1.0:
    raise SystemExit('T must be a multiple of the ranks, and --fill in (0, 1]')
per = a.T // n


def draw(r):
    """Expert r's X, W and token counts per block, from its own seed (every process draws every expert's counts
    alike, so each knows which of its rows are tokens)."""
    g = torch.Generator().manual_seed(1000 + r)
    X = (torch.rand(a.T, a.F, generator=g) * 2 - 1).to(torch.bfloat16)
    W = ((torch.rand(a.F, a.H, generator=g) * 2 - 1) / a.F ** 0.5).to(torch.bfloat16)
    c = torch.clamp((torch.rand(n, generator=g) * 0.4 + a.fill - 0.2) * per, 0, per).to(torch.int32)
    return X, W, c


X, W, counts, cnt = {}, {}, {}, {}
for r in range(n):
    x_, w_, cnt[r] = draw(r)
    if r in R.mine:
        X[r], W[r], counts[r] = x_.to(R.device(r)), w_.to(R.device(r)), cnt[r].to(R.device(r))
out = {r: torch.empty(a.T, a.H, dtype=torch.bfloat16, device=R.device(r)) for r in R.mine}


def fused():
    R.call(lambda r, s: baton.gemm_alltoall(X[r], W[r], out=out[r], comm=R.comm[r], stream=s,
                                            counts=counts[r] if a.fill < 1.0 else None))


if R.procs:   # PyTorch: the GEMM, then all_to_all_single
    r0 = R.mine[0]
    Y, ref = torch.empty_like(out[r0]), {r0: torch.empty_like(out[r0])}

    def reference():
        torch.matmul(X[r0], W[r0], out=Y)
        R.dist.all_to_all_single(ref[r0], Y)
        return ref
else:
    def reference():
        Y = {r: X[r] @ W[r] for r in R.mine}
        return {q: torch.cat([Y[p][q * per:(q + 1) * per].to(R.device(q)) for p in R.mine]) for q in R.mine}

fused()
R.sync()
want = reference()
R.sync()
err = 0.0
for q in R.mine:   # block p of rank q's out: the first cnt[p][q] rows are tokens (expert p's count for rank q)
    for p in range(n):
        k = int(cnt[p][q]) if a.fill < 1.0 else per
        got, ref_ = out[q][p * per:p * per + k].float(), want[q][p * per:p * per + k].float()
        if k:
            err = max(err, float(((got - ref_).abs() / (ref_.abs() + 1)).max()))
err = R.most(err)
how = 'CUDA graph replays' if a.graph else 'eager calls, host launch costs included'
t_fused, t_ref = R.timed(fused, a.graph, 10), R.timed(reference, a.graph, 10)
tokens = sum(int(cnt[r].sum()) for r in range(n)) if a.fill < 1.0 else n * a.T
R.say(f'{R.comm[R.mine[0]].last_algorithm()}: {R.where()}, T={a.T} H={a.H} F={a.F}, {tokens} of {n * a.T} rows tokens: '
      f'max relative |baton - torch| = {err:.3g}; per call ({how}): baton {t_fused:.1f} us, torch (matmul + exchange) '
      f'{t_ref:.1f} us')
raise SystemExit(R.end(err <= 2 ** -6))

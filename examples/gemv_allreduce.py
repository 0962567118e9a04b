#!/usr/bin/env python3
"""The fused GEMV + AllReduce from PyTorch: every rank holds its share of a
linear layer's columns (W_r [M, K], x_r [K]) and gets y = sum of W_r @ x_r.
One process may drive every rank (ranks may share a GPU: --gpus 1):

    BATON_ALGO_DIR=DIR python3 examples/gemv_allreduce.py --ranks 4 --gpus 1 --M 8192 --K 2048

or, as serving engines run it, a process per GPU under torchrun, the calls
captured into a CUDA graph with --graph:

    BATON_ALGO_DIR=DIR torchrun --nproc-per-node 4 examples/gemv_allreduce.py --M 8192 --K 2048 --graph

DIR holds the fused programs compiled for that many ranks (tools/measure/gpu_prep.sh
--fused ... N OUT puts them in OUT/fused/).  Prints the program baton ran,
the largest error against a float64 reference (one process) or against
PyTorch's own result (torch.mv, then dist.all_reduce in float32: a process
per GPU), and the time per call of the fused call and of PyTorch's way.
"""
import argparse

from ranks import Ranks, baton, torch

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2, help='ranks, one process (under torchrun: WORLD_SIZE)')
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--M', type=int, default=8192)
ap.add_argument('--K', type=int, default=2048)
ap.add_argument('--dtype', default='bf16', choices=['bf16', 'f16', 'f32'])
ap.add_argument('--graph', action='store_true', help='time replays of a CUDA graph (a process per GPU)')
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[a.dtype]
R = Ranks(a.ranks, a.gpus, a.lib)
if a.graph and not R.procs:
    raise SystemExit('--graph: run a process per GPU (torchrun --nproc-per-node N ...)')

# Rank r's operands from its own seed: the same whoever drives it.
W, x, y = {}, {}, {}
for r in R.mine:
    g = torch.Generator().manual_seed(1000 + r)
    W[r] = torch.randn(a.M, a.K, generator=g).to(dtype).to(R.device(r))
    x[r] = torch.randn(a.K, generator=g).to(dtype).to(R.device(r))
    y[r] = torch.empty(a.M, dtype=dtype, device=R.device(r))


def fused():
    R.call(lambda r, s: baton.gemv_allreduce(W[r], x[r], y[r], comm=R.comm[r], stream=s))


fused()
R.sync()
if R.procs:   # PyTorch's result: each rank's product, summed by NCCL, in float32
    r = R.mine[0]
    ref = W[r].float() @ x[r].float()
    scale = W[r].float().abs() @ x[r].float().abs()
    R.dist.all_reduce(ref)
    R.dist.all_reduce(scale)
    err = R.most(((y[r].float() - ref).abs() / scale.clamp(min=1)).max().item())
else:
    ref = sum(W[r].double().cpu() @ x[r].double().cpu() for r in R.mine)
    scale = sum((W[r].double().cpu().abs() @ x[r].double().cpu().abs()) for r in R.mine)
    err = max(((y[r].double().cpu() - ref).abs() / scale.clamp(min=1)).max().item() for r in R.mine)
R.say(f'{R.where()}, y = sum of W_r @ x_r, M={a.M} K={a.K} {a.dtype}: ran {R.comm[R.mine[0]].last_algorithm()}, '
      f'largest error {err:.2e} of the terms\' magnitude')

yb = {r: torch.empty_like(y[r]) for r in R.mine}


def torch_way():   # what the fused call replaces: each rank's GEMV, then the sum
    if R.procs:
        r = R.mine[0]
        torch.mv(W[r], x[r], out=yb[r])
        R.dist.all_reduce(yb[r])
    else:   # one process: the products summed on the first rank's GPU
        sum((W[r] @ x[r]).to(R.device(R.mine[0])) for r in R.mine)


how = 'CUDA graph replays' if a.graph else 'eager calls, host launch costs included'
R.say(f'per call ({how}): baton fused {R.timed(fused, a.graph):.1f} us, PyTorch '
      f'{"torch.mv then dist.all_reduce" if R.procs else "W @ x then the sum"} {R.timed(torch_way, a.graph):.1f} us')
raise SystemExit(R.end(err < 0.05))

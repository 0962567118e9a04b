#!/usr/bin/env python3
"""The fused GEMV + AllReduce from PyTorch: every rank holds its share of a
linear layer's columns (W_r [M, K], x_r [K]) and gets y = sum of W_r @ x_r.
One process drives every rank here (ranks may share a GPU: --gpus 1); with
one process per GPU, make each rank's communicator with baton.Comm.init_rank
and the unique id sent by torch.distributed instead of Comm.init_all.

    BATON_ALGO_DIR=DIR python3 examples/gemv_allreduce.py --ranks 4 --gpus 1 --M 8192 --K 2048

DIR holds the fused programs compiled for that many ranks (tools/measure/gpu_prep.sh
puts them in OUT/default/ and OUT/fused/).  Prints the program baton ran,
the largest error against a float64 reference and the times of the fused
call and of PyTorch's W @ x followed by the sum, per call.
"""
import argparse, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch
import baton

ap = argparse.ArgumentParser()
ap.add_argument('--ranks', type=int, default=2)
ap.add_argument('--gpus', type=int, default=0, help='GPUs the ranks are spread over (default: one each)')
ap.add_argument('--M', type=int, default=8192)
ap.add_argument('--K', type=int, default=2048)
ap.add_argument('--dtype', default='bf16', choices=['bf16', 'f16', 'f32'])
ap.add_argument('--lib', default=None, help='libbaton.so (default: build/libbaton.so beside this checkout)')
a = ap.parse_args()
dtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[a.dtype]
gpus = a.gpus or a.ranks
baton.load(a.lib)

devices = [r % gpus for r in range(a.ranks)]
comms = baton.Comm.init_all(devices)
g = torch.Generator().manual_seed(1)
W = [torch.randn(a.M, a.K, generator=g).to(dtype).to(f'cuda:{d}') for d in devices]
x = [torch.randn(a.K, generator=g).to(dtype).to(f'cuda:{d}') for d in devices]
y = [torch.empty(a.M, dtype=dtype, device=f'cuda:{d}') for d in devices]
# A stream per rank: ranks sharing a GPU wait for each other inside the
# kernel, so one stream for all of them would never finish.
streams = [torch.cuda.Stream(device=d) for d in devices]

def fused():
    with baton.group():   # one process, several ranks: their calls go out together
        for r in range(a.ranks):
            baton.gemv_allreduce(W[r], x[r], y[r], comm=comms[r], stream=streams[r])

fused()
for d in set(devices):
    torch.cuda.synchronize(d)
ref = sum(W[r].double().cpu() @ x[r].double().cpu() for r in range(a.ranks))
scale = sum((W[r].double().cpu().abs() @ x[r].double().cpu().abs()) for r in range(a.ranks))
err = max(((y[r].double().cpu() - ref).abs() / scale.clamp(min=1)).max().item() for r in range(a.ranks))
print(f'{a.ranks} ranks on {gpus} GPU(s), y = sum of W_r @ x_r, M={a.M} K={a.K} {a.dtype}: '
      f'ran {comms[0].last_algorithm()}, largest error {err:.2e} of the terms\' magnitude')

def timed(fn, n=20):
    fn()
    for d in set(devices): torch.cuda.synchronize(d)
    t0 = time.perf_counter()
    for _ in range(n): fn()
    for d in set(devices): torch.cuda.synchronize(d)
    return (time.perf_counter() - t0) / n * 1e6

def torch_way():   # what the fused call replaces: each rank's GEMV, then the sum (on GPU 0)
    parts = [W[r] @ x[r] for r in range(a.ranks)]
    s = sum(p.to('cuda:0') for p in parts)
    return s

print(f'per call: baton fused {timed(fused):.1f} us, PyTorch W @ x then sum {timed(torch_way):.1f} us '
      f'(one process, no graph: host launch costs included)')
for c in comms:
    c.destroy()
sys.exit(0 if err < 0.05 else 1)

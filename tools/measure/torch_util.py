"""What the PyTorch measurements of the fused operators share (torch_moe.py,
torch_fused.py): timing a call eagerly or as replays of a CUDA graph, the
comparison within one bf16 rounding, and a rank's process set-up (NCCL's
process group and baton's communicator)."""
import os
import re


def nccl_env():
    """NCCL's settings for every measurement here: multicast off; and with PyTorch's expandable segments, no
    registration of captured collectives' buffers (NCCL_GRAPH_REGISTER=0): NCCL registers each as one allocation,
    which expandable segments are not, and its captured AllToAll then never finished (docs/PERFORMANCE.md).  Both
    only where the environment does not say."""
    os.environ.setdefault('NCCL_NVLS_ENABLE', '0')
    alloc = os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '') + ',' + os.environ.get('PYTORCH_ALLOC_CONF', '')
    if re.search(r'expandable_segments:\s*true', alloc, re.I):
        os.environ.setdefault('NCCL_GRAPH_REGISTER', '0')


def timed(torch, fn, reps, graph, inner=1):
    """Mean microseconds per call of fn over reps calls, the best of 3 rounds: plain calls, or (graph) replays of
    a CUDA graph holding `inner` calls (reps // inner replays, at least one)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    run, calls = fn, 1
    if graph:
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr, capture_error_mode='relaxed'):   # baton's group may launch from a pool thread
            for _ in range(inner):
                fn()
        run, calls = gr.replay, inner
        gr.replay()   # the first replay uploads the graph
        torch.cuda.synchronize()
    n = max(1, reps // calls)
    best = None
    for _ in range(3):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            run()
        e1.record()
        e1.synchronize()
        us = e0.elapsed_time(e1) * 1000.0 / (n * calls)
        best = us if best is None else min(best, us)
    return best


def close(torch, a, b):
    """Elements of a off b by more than one bf16 rounding."""
    a, b = a.float(), b.float()
    tol = torch.maximum(a.abs(), b.abs()) / 128.0 + 1e-2
    return int(((a - b).abs() > tol).sum().item())


def rank_up(rank, n, lib, uid, port):
    """This process's GPU (rank), baton's library (lib, or the one beside the module), NCCL's process group and
    baton's communicator of n ranks (uid: baton.Comm.unique_id() made before the processes were spawned); one
    rank: no process group and a one-rank communicator.  Returns (torch, dist, baton, comm)."""
    import torch
    import torch.distributed as dist
    import baton
    torch.cuda.set_device(rank)
    baton.load(lib)
    if n == 1:
        return torch, dist, baton, baton.Comm.init_all([0])[0]
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ['MASTER_PORT'] = str(port)
    try:
        dist.init_process_group('nccl', rank=rank, world_size=n, device_id=torch.device('cuda', rank))
    except TypeError:   # a PyTorch without device_id
        dist.init_process_group('nccl', rank=rank, world_size=n)
    return torch, dist, baton, baton.Comm.init_rank(n, uid, rank)


def slowest(torch, dist, n, t, wrong):
    """Every rank's times (a dict) and wrong count gathered: the slowest rank's times and the most wrong."""
    if n == 1:
        return t, wrong
    keys = sorted(t)
    v = torch.tensor([t[k] for k in keys], device='cuda', dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    w = torch.tensor([wrong], device='cuda')
    dist.all_reduce(w, op=dist.ReduceOp.MAX)
    return dict(zip(keys, v.tolist())), int(w.item())

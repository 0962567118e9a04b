#!/usr/bin/env python3
"""torch_bench.py -- torch.distributed all_reduce timed as serving and
training code calls it: one process per GPU, NCCL backend, bf16 sum in
place, eager and captured in a CUDA graph (a graph of `iters` calls,
replayed); and, as the anchor a PyTorch user would pick instead, PyTorch's
own symmetric-memory one-shot and two-shot AllReduce in the same processes
(multicast off).  With --between, also each of those captured with a small
elementwise kernel between two calls (modes ending in _between), as a
model's graph has one: a collective then follows another library's
kernel, not its own.  Run it as is (PyTorch's NCCL), then with baton's
libnccl.so.2 in front (docs/NCCL.md) to compare:

  python3 tools/measure/torch_bench.py --ranks 4 --csv nccl.csv
  LD_PRELOAD=build/libnccl.so.2 BATON_ALGO_DIR=SET python3 tools/measure/torch_bench.py --ranks 4 --csv baton.csv

Every size is checked (the sum of known values) before it is timed; each
time is the median of `rounds` rounds, in microseconds per call.  Output:
one line per (mode, size) and, with --csv, a CSV (mode,bytes,us,ok)."""
import argparse
import os
import sys


def worker(rank, n, port, sizes, iters, rounds, symm, between, q):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
    out = []

    def timed(fn, graph):
        """Median microseconds per call of fn over `rounds` rounds of `iters`."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):   # warm-up (and, for a graph, the buffers' first use outside capture)
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        g = None
        if graph:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                for _ in range(iters):
                    fn()
            g.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(rounds):
            dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            if graph:
                g.replay()
            else:
                for _ in range(iters):
                    fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0 / iters)
        times.sort()
        return times[len(times) // 2]

    group = dist.group.WORLD
    gap = torch.zeros(256, device=dev, dtype=torch.float32)   # the kernel between two calls touches only this

    def then_gap(fn):
        def g():
            fn()
            gap.add_(1.0)
        return g

    for nbytes in sizes:
        count = max(1, nbytes // 2)
        base = (torch.arange(count, device=dev, dtype=torch.int64) % 13).to(torch.bfloat16)
        want = sum((torch.arange(count, dtype=torch.int64) % 13 + r) for r in range(n)).to(torch.bfloat16)
        x = base + rank
        dist.all_reduce(x)
        good = torch.equal(x.cpu(), want)
        y = base.clone()
        for mode in ("eager", "graph"):
            us = timed(lambda: dist.all_reduce(y), mode == "graph")
            out.append((mode, count * 2, us, good))
        if between:
            out.append(("graph_between", count * 2, timed(then_gap(lambda: dist.all_reduce(y)), True), good))
        if symm:
            try:
                import torch.distributed._symmetric_memory as symm_mem
                t = symm_mem.empty(count, dtype=torch.bfloat16, device=dev)
                symm_mem.rendezvous(t, group.group_name)
                t.copy_(base + rank)
                r1 = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group.group_name)
                ok1 = torch.equal(r1.cpu(), want)
                t.copy_(base + rank)
                torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group.group_name)
                ok2 = torch.equal(t.cpu(), want)
                us1 = timed(lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group.group_name), True)
                us2 = timed(lambda: torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group.group_name), True)
                out.append(("symm_one_shot_graph", count * 2, us1, ok1))
                out.append(("symm_two_shot_graph", count * 2, us2, ok2))
                if between:
                    us1 = timed(then_gap(lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group.group_name)), True)
                    us2 = timed(then_gap(lambda: torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group.group_name)), True)
                    out.append(("symm_one_shot_graph_between", count * 2, us1, ok1))
                    out.append(("symm_two_shot_graph_between", count * 2, us2, ok2))
            except Exception as e:   # an older PyTorch, or a size it refuses
                if rank == 0:
                    print(f"# symmetric memory at {count * 2} bytes: {type(e).__name__}: {e}", file=sys.stderr)
                symm = False
    dist.barrier()
    dist.destroy_process_group()
    q.put((rank, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--sizes", default="8,1K,32K,128K,512K,2M,8M,32M", help="bytes, comma-separated (K, M suffixes)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-symm", action="store_true", help="leave out PyTorch's symmetric-memory AllReduce")
    ap.add_argument("--between", action="store_true",
                    help="also time each graph with a small elementwise kernel between two calls")
    ap.add_argument("--csv")
    a = ap.parse_args()
    mult = {"K": 1024, "M": 1024 * 1024}
    sizes = [int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s) for s in a.sizes.split(",")]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, a.ranks, port, sizes, a.iters, a.rounds, not a.no_symm, a.between, q))
             for r in range(a.ranks)]
    for p in procs:
        p.start()
    res = dict(q.get(timeout=1800) for _ in procs)
    for p in procs:
        p.join()
    rows = res[0]
    bad = 0
    for i, (mode, nbytes, us, good) in enumerate(rows):
        good = all(res[r][i][3] for r in res)   # right on every rank
        worst = max(res[r][i][2] for r in res)  # the slowest rank's time
        bad += not good
        print(f"{mode:22s} {nbytes:>11d} B {worst:10.2f} us {'ok' if good else 'WRONG'}")
        rows[i] = (mode, nbytes, worst, good)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("mode,bytes,us,ok\n")
            for mode, nbytes, us, good in rows:
                f.write(f"{mode},{nbytes},{us:.3f},{int(good)}\n")
    return 1 if bad or any(p.exitcode for p in procs) else 0


if __name__ == "__main__":
    sys.exit(main())

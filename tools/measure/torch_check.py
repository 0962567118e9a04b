#!/usr/bin/env python3
"""torch_check.py -- torch.distributed (NCCL backend) collectives checked
against values computed on the host, one process per GPU.  Run it with
baton's libnccl.so.2 in front of NCCL to prove the drop-in (docs/NCCL.md):

  LD_PRELOAD=build/runtime/libnccl.so.2 BATON_ALGO_DIR=ALGS BATON_DEBUG=INFO \\
      python3 tools/measure/torch_check.py --ranks 4

Each check prints `ok N - what` or `not ok N - what`; the exit status is 1
when any check failed.  Sizes cover small and large messages and counts
that do not divide by the rank count where the collective allows it."""
import argparse
import os
import sys


def worker(rank, n, port, sizes, q, dump_after=0):
    if dump_after > 0:   # a rank still running then prints where it is, and ends
        import faulthandler
        faulthandler.dump_traceback_later(dump_after, exit=True)
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
    results = []

    def check(what, got, want):
        good = torch.equal(got.cpu(), want.cpu())
        if not good:
            bad = (got.cpu() != want.cpu()).nonzero()
            what += f" (first wrong index {bad[0].tolist()}: got {got.cpu().flatten()[0].item()})"
        results.append((good, f"rank {rank}: {what}"))

    for count in sizes:
        # all_reduce, sum, int32 (exact) and float32 with integer values (exact too).
        for dt in (torch.int32, torch.float32):
            x = (torch.arange(count, device=dev, dtype=torch.int64) % 97 + rank).to(dt)
            want = sum((torch.arange(count, dtype=torch.int64) % 97 + r) for r in range(n)).to(dt)
            dist.all_reduce(x)
            check(f"all_reduce sum {dt} count {count}", x, want)
        # all_gather_into_tensor.
        x = torch.full((count,), rank + 1, device=dev, dtype=torch.float32)
        out = torch.empty(count * n, device=dev, dtype=torch.float32)
        dist.all_gather_into_tensor(out, x)
        want = torch.cat([torch.full((count,), r + 1, dtype=torch.float32) for r in range(n)])
        check(f"all_gather_into_tensor count {count}", out, want)
        # reduce_scatter_tensor, sum.
        x = torch.arange(count * n, device=dev, dtype=torch.float32) % 13 + rank
        out = torch.empty(count, device=dev, dtype=torch.float32)
        dist.reduce_scatter_tensor(out, x)
        full = sum(torch.arange(count * n, dtype=torch.float32) % 13 + r for r in range(n))
        check(f"reduce_scatter_tensor count {count}", out, full[rank * count:(rank + 1) * count])
        # all_to_all_single, equal splits.
        x = torch.arange(count * n, device=dev, dtype=torch.float32) + 1000 * rank
        out = torch.empty(count * n, device=dev, dtype=torch.float32)
        dist.all_to_all_single(out, x)
        want = torch.cat([torch.arange(rank * count, (rank + 1) * count, dtype=torch.float32) + 1000 * r
                          for r in range(n)])
        check(f"all_to_all_single count {count}", out, want)
        # all_reduce captured in a CUDA graph between PyTorch's own kernels
        # (its process group joins its stream to the caller's by events):
        # each call reads what the kernel before it wrote, and the kernel
        # after it reads its sum, on every replay.
        base = (torch.arange(count, device=dev, dtype=torch.int64) % 31 + rank).to(torch.float32)
        y = torch.empty_like(base)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):   # the buffers' first use outside capture
            y.copy_(base)
            dist.all_reduce(y)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            y.copy_(base)
            dist.all_reduce(y)
            y.mul_(2)
            dist.all_reduce(y)
            y.add_(1)
        want = 2 * n * sum((torch.arange(count, dtype=torch.int64) % 31 + r) for r in range(n)).to(torch.float32) + 1
        for replay in range(3):
            y.zero_()
            g.replay()
            torch.cuda.synchronize()
            check(f"all_reduce captured between other kernels, count {count}, replay {replay}", y, want)
    # Memory handed back to the GPU after a large eager call ran on it
    # (baton's ranks map each other's buffers for such calls): back once
    # the next such call has run, on every rank.
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.empty_cache()
    free0 = torch.cuda.mem_get_info()[0]
    dist.barrier()
    x = torch.ones(1 << 29, device=dev)          # 2 GiB
    dist.all_reduce(x[:1 << 24])                  # 64 MiB of it
    torch.cuda.synchronize()
    del x
    torch.cuda.empty_cache()
    y = torch.ones(1 << 24, device=dev)          # a new allocation: the next such call
    dist.all_reduce(y)
    check("all_reduce on a new tensor after a freed one", y[:4], torch.full((4,), float(n)))
    torch.cuda.synchronize()
    dist.barrier()
    lost = (free0 - torch.cuda.mem_get_info()[0]) / 2**20
    results.append((lost < 512, f"rank {rank}: a 2 GiB tensor freed (empty_cache) after an eager all_reduce on it: "
                                f"{lost:.0f} MiB of the GPU's memory not back after the next call (64 MiB in use)"))
    torch.cuda.synchronize()
    q.put(results)   # reported before the teardown, which NCCL's can hang in (below)
    # NCCL 2.28 alone hung in destroy_process_group (2 x H200) while the
    # last captured graph was alive: it goes first.
    del g
    torch.cuda.synchronize()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--sizes", default="1,1000,65536,1048577,16777216",
                    help="element counts per rank, comma-separated")
    ap.add_argument("--dump-after", type=int, default=0,
                    help="seconds after which a rank still running prints its Python stack and ends (0: never)")
    a = ap.parse_args()
    import torch.multiprocessing as mp
    sizes = [int(s) for s in a.sizes.split(",")]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a.ranks, a.port, sizes, q, a.dump_after)) for r in range(a.ranks)]
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results += q.get(timeout=600)
        except Exception as e:  # a rank died or hung: say so, do not wait forever
            results.append((False, f"a rank did not report: {e!r}"))
            break
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():   # hung in its teardown: ended here, and said
            p.kill()
            p.join()
            results.append((False, f"process {p.pid} had not ended 60 s after reporting (killed)"))
        elif p.exitcode != 0:
            results.append((False, f"process {p.pid} exited with {p.exitcode}"))
    for i, (good, what) in enumerate(results, 1):
        print(f"{'ok' if good else 'not ok'} {i} - {what}")
    failed = sum(1 for g, _ in results if not g)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

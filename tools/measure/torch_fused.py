#!/usr/bin/env python3
"""GEMV + AllReduce and embedding bags + AllToAll against what PyTorch runs
today, one process per GPU (as torchrun runs them), side by side in one run
per shape; --graph times replays of CUDA graphs (as serving engines run
them), else eager calls.

  gemv:  each rank's y_r = W_r @ x_r (torch.mv: cuBLAS's GEMV), then
         dist.all_reduce(y) (NCCL), against baton.gemv_allreduce;
         W [M, K] per rank, the tensor-parallel row split of a linear layer.
  embed: each rank pools its T tables for the global batch of B samples
         (F.embedding_bag over the stacked tables, bags of 1-99 indices),
         dist.all_to_all_single sends each rank its samples, and a copy
         lays them out [B/n, n*T*D] (the shuffle); against
         baton.embedding_alltoall, which does all three in one kernel.

Reports per shape the parts alone, the baseline (the parts in a row on one
stream) and baton: the slowest rank's mean per call, the best of 3 rounds.
baton's result is checked against the baseline's on every shape (within
one bf16 rounding; f32 and f16 within the same relative bound).

    BATON_ALGO_DIR=DIR python3 tools/measure/torch_fused.py --op gemv|embed --ranks N [--graph] [--register]
        [--dtype bf16|f16|f32] [--quick | --shapes 'M,K;...' | 'B,T,D;...'] [--csv FILE] [--lib PATH]

--register (embed) registers each rank's output with baton first, so that
eager calls too store straight into the peers' outputs.

DIR holds the fused programs for N ranks (tools/measure/gpu_prep.sh --fused
... N OUT: OUT/fused).  NCCL_NVLS_ENABLE=0 is set (and NCCL_GRAPH_REGISTER=0 with expandable segments: torch_util.nccl_env).
"""
import argparse, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
from torch_util import close, nccl_env, rank_up, slowest, timed  # noqa: E402

GEMV = [(m, k) for m in (4096, 8192, 16384, 32768, 65536) for k in (1024, 2048, 4096, 7168)]
GEMV_QUICK = [(4096, 1024), (8192, 2048), (65536, 7168)]
EMBED = [(2048, t, d) for t in (16, 64, 256) for d in (64, 128, 256)]
EMBED_QUICK = [(2048, 16, 64), (2048, 64, 128)]
BAG = 50          # mean indices per bag (1 .. 2*BAG - 1)
ROW_BYTES = 256 << 20   # each rank's stacked tables at most: rows per table shrink as T x D grows


def shapes(args):
    if args.shapes:
        return [tuple(int(v) for v in x.split(',')) for x in args.shapes.split(';')]
    if args.op == 'gemv':
        return GEMV_QUICK if args.quick else GEMV
    return EMBED_QUICK if args.quick else EMBED


def gemv_case(torch, dist, baton, comm, n, shape, dt, g, register=False):
    """The parts, baseline and baton of one GEMV + AllReduce shape, the check of baton's y, and the calls a graph
    holds.  W cycles through copies that pass 4x the L2 together (as a decode step's layers do), each part's
    calls in turn on the next copy."""
    M, K = shape
    W0 = ((torch.rand(M, K, device='cuda', generator=g) * 2 - 1) / (K ** 0.5)).to(dt)
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    free = torch.cuda.mem_get_info()[0]
    nw = max(1, min(8, -(-4 * l2 // W0.nbytes), int(free * 0.5) // W0.nbytes))
    Ws = [W0] + [W0.clone() for _ in range(nw - 1)]
    x = (torch.rand(K, device='cuda', generator=g) * 2 - 1).to(dt)
    yb = torch.empty(M, device='cuda', dtype=dt)
    yt = torch.empty_like(yb)
    turn = {}

    def next_w(part):
        i = turn.get(part, 0)
        turn[part] = i + 1
        return Ws[i % nw]

    def gemv():
        torch.mv(next_w('gemv'), x, out=yb)

    def allreduce():
        dist.all_reduce(yb)

    def baseline():
        torch.mv(next_w('base'), x, out=yb)
        if n > 1:
            allreduce()

    def fused():
        baton.gemv_allreduce(next_w('baton'), x, yt, comm=comm)

    parts = {'gemv': gemv, 'base': baseline, 'baton': fused}
    if n > 1:
        parts['coll'] = allreduce

    def check():
        turn.clear()
        fused()
        turn.clear()
        baseline()
        torch.cuda.synchronize()
        return close(torch, yt, yb)
    return parts, check, nw * -(-10 // nw)


def embed_case(torch, dist, baton, comm, n, shape, dt, g, register=False):
    """The parts, baseline and baton of one embedding bags + AllToAll shape, and the check of baton's out."""
    import torch.nn.functional as F
    B, T, D = shape
    rows = max(1024, min(100000, ROW_BYTES // (T * D * torch.tensor([], dtype=dt).element_size())))
    table = (torch.rand(T * rows, D, device='cuda', generator=g) * 2 - 1).to(dt)
    sizes = torch.randint(1, 2 * BAG, (B * T,), device='cuda', generator=g)
    offsets = torch.zeros(B * T + 1, device='cuda', dtype=torch.int64)
    offsets[1:] = torch.cumsum(sizes, 0)
    L = int(offsets[-1].item())
    bag_table = torch.arange(B * T, device='cuda') % T   # bag s*T + t reads table t
    rows_of = torch.randint(0, rows, (L,), device='cuda', generator=g)
    indices = (torch.repeat_interleave(bag_table, sizes) * rows + rows_of).contiguous()
    per = B // n
    pooled = torch.empty(B * T, D, device='cuda', dtype=dt)
    recv = torch.empty(n, per, T * D, device='cuda', dtype=dt)
    ob = torch.empty(per, n * T * D, device='cuda', dtype=dt)
    ot = torch.empty_like(ob)
    starts = offsets[:-1]

    def pool_only():
        pooled.copy_(F.embedding_bag(indices, table, starts, mode='sum'))

    def a2a():
        dist.all_to_all_single(recv, pooled.view(n, per, T * D))

    def shuffle():
        ob.view(per, n, T * D).copy_(recv.transpose(0, 1))

    def baseline():
        pool_only()
        if n > 1:
            a2a()
            shuffle()
        else:
            ob.copy_(pooled.view(per, T * D))

    win = comm.register(ot) if register and n > 1 else None   # every rank, in order

    def fused():
        baton.embedding_alltoall(table, indices, offsets, B, T, out=ot, comm=comm)

    parts = {'pool': pool_only, 'base': baseline, 'baton': fused}
    if n > 1:
        parts['coll'] = a2a

    def check():
        fused()
        baseline()
        torch.cuda.synchronize()
        return close(torch, ot, ob)
    parts['end'] = (lambda: comm.deregister(win)) if win is not None else None
    return parts, check, 10


def worker(rank, n, args, uid, port):
    torch, dist, baton, comm = rank_up(rank, n, args.lib, uid, port)
    dt = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}[args.dtype]
    g = torch.Generator(device='cuda').manual_seed(4321 + rank)
    case = gemv_case if args.op == 'gemv' else embed_case
    first = 'gemv' if args.op == 'gemv' else 'pool'
    rows = []
    for shape in shapes(args):
        err, wrong = '', -1
        t = {}
        try:
            parts, check, inner = case(torch, dist, baton, comm, n, shape, dt, g, args.register)
            wrong = check()
            for k in (first, 'coll', 'base', 'baton'):
                if k not in parts:
                    continue
                if n > 1:
                    dist.barrier()
                t[k] = timed(torch, parts[k], args.reps, args.graph or n == 1, inner)
            if parts.get('end'):
                parts['end']()
        except Exception as e:   # a shape baton refuses, or memory: reported, the others go on
            err = str(e).replace(',', ';').replace('\n', ' ')[:120]
        keys = (first, 'coll', 'base', 'baton')
        t, wrong = slowest(torch, dist, n, {k: t.get(k, -1.0) for k in keys}, wrong)
        rows.append((shape, t, wrong, err))
        if rank == 0:
            bt, base = t['baton'], t['base']
            print(' '.join(f'{v:6d}' for v in shape) + f'  {first} {t[first]:9.1f}  coll {t["coll"]:9.1f}  '
                  f'base {base:9.1f}  baton {bt:9.1f} us  {base / bt if bt > 0 else 0:5.3f}x  wrong {wrong} {err}',
                  flush=True)
        torch.cuda.empty_cache()
    if rank == 0:
        sp = [t['base'] / t['baton'] for _, t, w, e in rows if t['baton'] > 0 and t['base'] > 0]
        if sp:
            print(f'# {len(sp)} shapes: baseline/baton least {min(sp):.3f} most {max(sp):.3f} mean '
                  f'{sum(sp) / len(sp):.3f}; wrong {sum(max(w, 0) for _, _, w, _ in rows)}', flush=True)
        if args.csv:
            dims = 'M,K' if args.op == 'gemv' else 'B,T,D'
            with open(args.csv, 'w') as f:
                f.write(f'op,ranks,graph,dtype,{dims},{first}_us,coll_us,base_us,baton_us,speedup,wrong,error\n')
                for shape, t, wrong, err in rows:
                    bt = t['baton']
                    f.write(f"{args.op},{n},{int(args.graph)},{args.dtype}," + ','.join(str(v) for v in shape) +
                            f",{t[first]:.2f},{t['coll']:.2f},{t['base']:.2f},{bt:.2f},"
                            f"{t['base'] / bt if bt > 0 else -1:.3f},{wrong},{err}\n")
    comm.destroy()
    if n > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--op', choices=('gemv', 'embed'), required=True)
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--graph', action='store_true', help='time replays of CUDA graphs (else eager calls)')
    ap.add_argument('--register', action='store_true',
                    help="embed: register each rank's output with baton (eager calls then run direct)")
    ap.add_argument('--dtype', choices=('bf16', 'f16', 'f32'), default=None,
                    help='element type (default bf16 for gemv, f32 for embed)')
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--shapes', default=None, help="'M,K;...' (gemv) or 'B,T,D;...' (embed) instead of the grid")
    ap.add_argument('--csv', default=None)
    ap.add_argument('--reps', type=int, default=100, help='calls per round (rounded to whole graphs)')
    ap.add_argument('--lib', default=None)
    args = ap.parse_args()
    if args.dtype is None:
        args.dtype = 'bf16' if args.op == 'gemv' else 'f32'
    if args.ranks < 1:
        ap.error('--ranks is at least 1')
    nccl_env()
    n = args.ranks
    import baton
    baton.load(args.lib)
    uid = baton.Comm.unique_id() if n > 1 else None
    print(f'# {args.op}, {n} ranks (a process each), {args.dtype}, {"CUDA graphs" if args.graph else "eager"}: '
          f'PyTorch + NCCL against baton; us per call, the slowest rank')
    if n == 1:
        worker(0, 1, args, None, 0)
        return
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(n, args, uid, 29500 + int(time.time()) % 1000), nprocs=n, join=True)


if __name__ == '__main__':
    main()

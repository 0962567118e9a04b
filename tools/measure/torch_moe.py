#!/usr/bin/env python3
"""GEMM + AllToAll (the mixture-of-experts combine) against what PyTorch
runs today, side by side in one run, per shape: every rank computes its
expert's Y = X @ W (cuBLAS through torch.matmul) and NCCL's AllToAll
(dist.all_to_all_single) sends each rank its tokens' rows; baton does both
in one kernel (baton.gemm_alltoall).  Each rank holds T tokens (T/n from
each rank), X [T, F], W [F, H], bf16.  Reports per shape the GEMM alone,
the AllToAll alone, the baseline (GEMM then AllToAll on one stream) and
baton, the slowest rank's mean of the best of 3 rounds; baton's output is
checked against the baseline's on every shape (within one bf16 rounding).

With one process (no --ranks, or --ranks 1) there is no AllToAll: baton's
one-rank program is the GEMM opcode alone inside the interpreter, timed
against torch.matmul, both replayed from CUDA graphs.  --share N runs N
ranks on one GPU in one process against the N GEMMs in turn (NCCL
refuses ranks that share a GPU): what the exchange costs baton there.

    BATON_ALGO_DIR=DIR python3 tools/measure/torch_moe.py [--ranks N [--graph] | --share N]
                                                  [--quick | --shapes 'T,H,F;...'] [--fill F] [--csv FILE] [--lib PATH]

--graph times the N ranks' calls (baseline and baton alike) as replays of
CUDA graphs, as serving engines run them; without it they are eager.  A
captured baton call learns its peers' outputs at capture and stores its
rows straight into them; an eager one exchanges through FIFOs, unless
--register registers every rank's output with baton first (then it too
stores straight into them).

--fill F makes the combine uneven (baton.gemm_alltoall's counts=): block q
of X holds about F of its rows as rank q's tokens, the rest padding, which
baton skips tile by tile; PyTorch multiplies the padded X whole (as a
capacity-factor MoE does), and torch.matmul over the tokens alone (the
dropless ideal) is timed beside it.

DIR holds the programs for N ranks (tools/measure/gpu_prep.sh --fused ... N OUT:
OUT/fused).  N processes, one GPU each (NCCL_NVLS_ENABLE=0 is set, and NCCL_GRAPH_REGISTER=0 with expandable segments: torch_util.nccl_env).
"""
import argparse, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
from torch_util import close, nccl_env, rank_up, slowest, timed  # noqa: E402

TOKENS = [1024, 2048, 4096, 8192]
HS = [4096, 8192]
FS = [1024, 2048, 4096, 14336]


def shapes(quick, only=None):
    if only:
        return [tuple(int(v) for v in x.split(',')) for x in only.split(';')]
    if quick:
        return [(1024, 4096, 1024), (4096, 8192, 4096), (8192, 4096, 14336)]
    return [(t, h, f) for t in TOKENS for h in HS for f in FS]


def worker(rank, n, args, uid, port):
    torch, dist, baton, comm = rank_up(rank, n, args.lib, uid, port)
    g = torch.Generator(device='cuda').manual_seed(1234 + rank)
    rows = []
    for T, H, F in shapes(args.quick, args.shapes):
        X = (torch.rand(T, F, device='cuda', generator=g) * 2 - 1).to(torch.bfloat16)
        W = ((torch.rand(F, H, device='cuda', generator=g) * 2 - 1) / (F ** 0.5)).to(torch.bfloat16)
        Y = torch.empty(T, H, device='cuda', dtype=torch.bfloat16)
        base = torch.empty_like(Y)
        out = torch.empty_like(Y)
        reps = max(3, min(args.reps, int(2e6 / max(1.0, 2.0 * T * H * F / 4e8))))   # about 2 s a shape at most

        def gemm():
            torch.matmul(X, W, out=Y)

        def a2a():
            dist.all_to_all_single(base, Y)

        def baseline():
            gemm()
            a2a()

        counts, cnt = None, None
        if args.fill:   # uneven: block q holds cnt[q] tokens, the rest padding (the same draw on every rank)
            per = T // n
            gen = torch.Generator().manual_seed(77 + rank)
            lo, hi = max(0, int(per * args.fill * 0.5)), min(per, int(per * args.fill * 1.5))
            cnt = torch.randint(lo, hi + 1, (n,), generator=gen, dtype=torch.int32)
            counts = cnt.cuda()
            Xv = torch.cat([X[q * per:q * per + int(cnt[q])] for q in range(n)])   # the tokens alone, end to end
            Yv = torch.empty(Xv.shape[0], H, device='cuda', dtype=torch.bfloat16)

        win = comm.register(out) if args.register and n > 1 else None   # every rank, in order

        def fused():
            baton.gemm_alltoall(X, W, out=out, comm=comm, counts=counts)

        def tokens_only():
            torch.matmul(Xv, W, out=Yv)

        err = ''
        try:
            fused()
            (baseline if n > 1 else gemm)()
            torch.cuda.synchronize()
            if cnt is None:
                wrong = close(torch, out, base if n > 1 else Y)
            else:   # block q of rank r's out: the first counts[q] rows of expert q's, as sent (its own draw)
                ref = base if n > 1 else Y
                per = T // n
                mine = torch.zeros(n, dtype=torch.int32)
                if n > 1:   # what each expert's block for this rank holds: that expert's count for this rank
                    allc = [torch.zeros(n, dtype=torch.int32, device='cuda') for _ in range(n)]
                    dist.all_gather(allc, counts)
                    mine = torch.stack([c.cpu()[rank] for c in allc])
                else:
                    mine = cnt
                wrong = sum(close(torch, out[q * per:q * per + int(mine[q])], ref[q * per:q * per + int(mine[q])])
                            for q in range(n))
        except Exception as e:   # a shape baton refuses: reported, the others go on
            err, wrong = str(e).replace(',', ';')[:120], -1
        graph = n == 1 or args.graph
        if n > 1:
            dist.barrier()
        t = {'gemm': timed(torch, gemm, reps, graph)}
        if cnt is not None:
            t['tokens'] = timed(torch, tokens_only, reps, graph)
        if n > 1:
            dist.barrier()
            t['a2a'] = timed(torch, a2a, reps, graph)
            dist.barrier()
            t['base'] = timed(torch, baseline, reps, graph)
        if not err:
            if n > 1:
                dist.barrier()
            t['baton'] = timed(torch, fused, reps, graph)
        if n > 1:   # the slowest rank's times
            t, wrong = slowest(torch, dist, n, {k: t.get(k, -1.0) for k in ('gemm', 'a2a', 'base', 'baton')}, wrong)
        rows.append((T, H, F, t, wrong, err))
        if rank == 0:
            print_row(n, T, H, F, t, wrong, err)
            if cnt is not None:
                fill = float(cnt.sum()) / T
                print(f'{"":20s}uneven: {fill:.2f} of the rows are tokens; torch.matmul over the tokens alone '
                      f'{t["tokens"]:9.1f} us (rank 0)', flush=True)
        if win is not None:
            comm.deregister(win)
        del X, W, Y, base, out
        torch.cuda.empty_cache()
    if rank == 0 and args.csv:
        with open(args.csv, 'w') as f:
            f.write('ranks,tokens,H,F,gemm_us,a2a_us,base_us,baton_us,speedup,gemm_tflops,baton_tflops,wrong,error\n')
            for T, H, F, t, wrong, err in rows:
                ref = t.get('base', t['gemm']) if n > 1 else t['gemm']
                bt = t.get('baton', -1)
                fl = 2.0 * T * H * F / 1e6
                f.write(f"{n},{T},{H},{F},{t['gemm']:.1f},{t.get('a2a', -1):.1f},{t.get('base', -1):.1f},{bt:.1f},"
                        f"{ref / bt if bt > 0 else -1:.3f},{fl / t['gemm']:.1f},{fl / bt if bt > 0 else -1:.1f},"
                        f"{wrong},{err}\n")
    comm.destroy()
    if n > 1:
        dist.destroy_process_group()


def shared(args):
    """--share N: N ranks on GPU 0 in this process (a proxy without NCCL, which refuses ranks sharing a GPU): baton's
    N fused calls, each on its own stream, against the N GEMMs one after the other (the computation alone at the
    GPU's full speed, the exchange free), both replayed from CUDA graphs.  The ratio is what the exchange and the
    ranks' sharing cost baton."""
    import torch
    import baton
    n = args.share
    baton.load(args.lib)
    comms = baton.Comm.init_all([0] * n)
    streams = [torch.cuda.Stream() for _ in range(n)]
    g = torch.Generator(device='cuda').manual_seed(99)
    print(f'# {n} ranks sharing one GPU: baton.gemm_alltoall on every rank (grouped, one stream each) against the '
          f'{n} GEMMs in turn (torch.matmul); CUDA graphs; us')
    rows = []
    for T, H, F in shapes(args.quick, args.shapes):
        X = [(torch.rand(T, F, device='cuda', generator=g) * 2 - 1).to(torch.bfloat16) for _ in range(n)]
        W = [((torch.rand(F, H, device='cuda', generator=g) * 2 - 1) / (F ** 0.5)).to(torch.bfloat16) for _ in range(n)]
        Y = [torch.empty(T, H, device='cuda', dtype=torch.bfloat16) for _ in range(n)]
        out = [torch.empty_like(y) for y in Y]

        def gemms():
            for r in range(n):
                torch.matmul(X[r], W[r], out=Y[r])

        def fused():
            main = torch.cuda.current_stream()
            for s in streams:
                s.wait_stream(main)
            with baton.group():
                for r in range(n):
                    baton.gemm_alltoall(X[r], W[r], out=out[r], comm=comms[r], stream=streams[r])
            for s in streams:
                main.wait_stream(s)

        err, wrong = '', -1
        try:
            fused()
            gemms()
            torch.cuda.synchronize()
            per = T // n
            wrong = sum(close(torch, out[q][r * per:(r + 1) * per], Y[r][q * per:(q + 1) * per])
                        for q in range(n) for r in range(n))
        except Exception as e:
            err = str(e).replace(',', ';')[:120]
        reps = max(3, min(args.reps, int(2e6 / max(1.0, 2.0 * n * T * H * F / 4e8))))
        tg = timed(torch, gemms, reps, True)
        tb = timed(torch, fused, reps, True) if not err else -1.0
        fl = 2.0 * n * T * H * F / 1e6
        print(f'{T:6d} {H:6d} {F:6d}  GEMMs in turn {tg:9.1f} us {fl / tg:6.0f} TFLOP/s   baton {tb:9.1f} us  '
              f'{tg / tb if tb > 0 else 0:5.3f}x  wrong {wrong} {err}', flush=True)
        rows.append((T, H, F, tg, tb, wrong, err))
        del X, W, Y, out
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, 'w') as f:
            f.write('ranks_sharing,tokens,H,F,gemms_us,baton_us,ratio,wrong,error\n')
            for T, H, F, tg, tb, wrong, err in rows:
                f.write(f'{n},{T},{H},{F},{tg:.1f},{tb:.1f},{tg / tb if tb > 0 else -1:.3f},{wrong},{err}\n')
    for c in comms:
        c.destroy()


def print_row(n, T, H, F, t, wrong, err):
    fl = 2.0 * T * H * F / 1e6
    bt = t.get('baton', -1)
    if n == 1:
        print(f'{T:6d} {H:6d} {F:6d}  cuBLAS {t["gemm"]:9.1f} us {fl / t["gemm"]:6.0f} TFLOP/s   baton {bt:9.1f} us '
              f'{fl / bt if bt > 0 else 0:6.0f} TFLOP/s  {t["gemm"] / bt if bt > 0 else 0:5.3f}x  wrong {wrong} {err}',
              flush=True)
    else:
        print(f'{T:6d} {H:6d} {F:6d}  gemm {t["gemm"]:9.1f}  a2a {t["a2a"]:9.1f}  base {t["base"]:9.1f}  '
              f'baton {bt:9.1f} us  {t["base"] / bt if bt > 0 else 0:5.3f}x  wrong {wrong} {err}', flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--shapes', default=None, help="'T,H,F;T,H,F...' instead of the grid")
    ap.add_argument('--csv', default=None)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--lib', default=None)
    ap.add_argument('--share', type=int, default=0, help='N ranks sharing GPU 0 in one process (no NCCL)')
    ap.add_argument('--graph', action='store_true', help='with --ranks N: time replays of CUDA graphs (else eager)')
    ap.add_argument('--register', action='store_true',
                    help="with --ranks N: register each rank's output with baton (eager calls then run direct)")
    ap.add_argument('--fill', type=float, default=0.0,
                    help='uneven combine: each block holds about this share of its rows as tokens (counts=), '
                         'the rest padding; the baseline multiplies the padded X whole (a capacity-factor MoE), '
                         'and the tokens alone are timed beside it')
    args = ap.parse_args()
    n = args.ranks
    if not 0.0 <= args.fill <= 1.0:
        ap.error('--fill is a share of the rows, in (0, 1]')
    nccl_env()
    if args.share:
        shared(args)
        return
    if n == 1:
        print('# one rank: the GEMM opcode alone in the interpreter against torch.matmul (cuBLAS), CUDA graphs')
        worker(0, 1, args, None, 0)
        return
    import torch.multiprocessing as mp
    import baton
    baton.load(args.lib)
    uid = baton.Comm.unique_id()
    print(f'# {n} ranks: GEMM (torch.matmul) then NCCL all_to_all_single against baton.gemm_alltoall; us, the '
          f'slowest rank; {"CUDA graphs" if args.graph else "eager"}')
    mp.spawn(worker, args=(n, args, uid, 29500 + int(time.time()) % 1000), nprocs=n, join=True)


if __name__ == '__main__':
    main()

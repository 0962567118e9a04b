#!/usr/bin/env python3
"""The same GEMM three ways on the same tensors, each replayed from a CUDA
graph: torch.matmul (cuBLAS), baton's GEMM opcode (a one-rank
baton.gemm_alltoall: the interpreter's gemm kernel), and the GEMM tile
engine in a kernel of its own (tools/measure/gemm_engine_lib.cu, built as
its header says).  Prints per shape each one's time per call (the best of
the rounds of graph replays) and its kernel's median duration from
PyTorch's profiler, and checks the engine's and baton's outputs against
torch.matmul's (within a bf16 rounding).  What the interpreter adds to
the engine is baton's kernel less the engine's.

    BATON_ALGO_DIR=DIR python3 tools/measure/torch_gemm.py LIBBATON LIBENGINE 'T,H,F;T,H,F...'
        [--rounds R] [--inner N] [--names] [--fill random|const] [--sustain MS]

--rounds: rounds of the three ways turn about (default 2), the order
reversed every other round, so that none always runs first after the
GPU has rested or last after it has heated; --inner: calls per captured
graph (default 1: a replay per call); --names: also print the kernels
each way launches (PyTorch's profiler), to see which cuBLAS kernel
torch.matmul picks; --fill const: X all ones and W all 1/64 instead of
random values (the same products with almost no bits toggling: at a
power cap, what the data costs the GEMMs shows as the difference);
--sustain MS: instead of the rounds, each way alone for about MS
milliseconds of back-to-back replays after a second of rest, in the order
torch, baton, engine, engine, baton, torch; prints each phase's time per
call and its wall-clock span (to line up with `nvidia-smi -lms 50`), and
per shape the mean of each way's two phases.  The rounds (the ways back
to back, each timing 3-300 ms of calls by shape) and these phases can
rank the GEMMs differently at a power cap: the clock a kernel keeps
depends on what ran before it and for how long.

DIR holds the one-rank GEMM + AllToAll program (baton compile
algorithms/moe_combine.lua --param ranks=1).
"""
import ctypes, json, os, sys, tempfile, time


def graph_of(torch, fn):
    """fn captured once in a CUDA graph (after two warm-up calls)."""
    fn()
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode='relaxed'):   # baton's group may launch from a pool thread
        fn()
    return g


def kernel_us(torch, run, reps):
    """The median duration of the kernels run launches over reps calls (PyTorch's profiler), and their
    names, each once, in the order first seen."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    p.export_chrome_trace(path)
    with open(path) as f:
        ev = [e for e in json.load(f)['traceEvents'] if e.get('cat') == 'kernel']
    os.unlink(path)
    d = sorted(e['dur'] for e in ev)
    return (d[len(d) // 2] if d else -1), list(dict.fromkeys(e.get('name', '?') for e in ev))


def sustained(torch, gr, ms, inner):
    """gr (a captured graph of `inner` calls) alone for about ms milliseconds of replays, after a second of
    rest: (us per call, wall-clock start, end)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    gr.replay()
    e1.record()
    e1.synchronize()
    n = max(3, int(ms / max(e0.elapsed_time(e1), 1e-3)))
    time.sleep(1.0)
    t0 = time.time()
    e0.record()
    for _ in range(n):
        gr.replay()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1000.0 / (n * inner), t0, time.time()


def off(torch, got, ref):
    """Elements of got off ref by more than a bf16 rounding or two."""
    return int(((got.float() - ref.float()).abs() > ref.float().abs() / 64 + 1e-2).sum())


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('libbaton')
    ap.add_argument('libengine')
    ap.add_argument('shapes')
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--inner', type=int, default=1)
    ap.add_argument('--names', action='store_true')
    ap.add_argument('--fill', choices=('random', 'const'), default='random')
    ap.add_argument('--sustain', type=int, default=0)
    a = ap.parse_args()
    if not 1 <= a.rounds <= 100 or not 1 <= a.inner <= 1000 or not 0 <= a.sustain <= 10000:
        sys.exit('torch_gemm.py: --rounds must be in 1 .. 100, --inner in 1 .. 1000 and --sustain in 0 .. 10000')
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
    import torch
    import baton
    from torch_moe import timed   # this directory's: graph replays, the best of 3 rounds
    baton.load(a.libbaton)
    eng = ctypes.CDLL(a.libengine)
    L, V = ctypes.c_long, ctypes.c_void_p
    eng.gemm_engine_prepare.argtypes = [V, L, V, L, L, L, L]
    eng.gemm_engine_run.argtypes = [V, L, ctypes.c_int, V]
    comm = baton.Comm.init_all([0])[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for T, H, F in (tuple(int(v) for v in s.split(',')) for s in a.shapes.split(';')):
        g = torch.Generator(device='cuda').manual_seed(1234)
        if a.fill == 'const':
            X = torch.ones(T, F, device='cuda', dtype=torch.bfloat16)
            W = torch.full((F, H), 1.0 / 64, device='cuda', dtype=torch.bfloat16)
        else:
            X = (torch.rand(T, F, device='cuda', generator=g) * 2 - 1).to(torch.bfloat16)
            W = ((torch.rand(F, H, device='cuda', generator=g) * 2 - 1) / F ** 0.5).to(torch.bfloat16)
        Y = torch.empty(T, H, device='cuda', dtype=torch.bfloat16)
        out, Ye = torch.empty_like(Y), torch.empty_like(Y)
        rc = eng.gemm_engine_prepare(X.data_ptr(), F, W.data_ptr(), H, T, H, F)
        if rc:
            sys.exit(f'gemm_engine_prepare {T}x{H}x{F}: {rc}')

        def engine():
            rc = eng.gemm_engine_run(Ye.data_ptr(), H, sms, torch.cuda.current_stream().cuda_stream)
            if rc:
                raise RuntimeError(f'gemm_engine_run: CUDA error {rc}')

        fns = {'torch': lambda: torch.matmul(X, W, out=Y),
               'baton': lambda: baton.gemm_alltoall(X, W, out=out, comm=comm), 'engine': engine}
        if a.sustain:
            t = {k: [] for k in fns}
            grs = {k: graph_of(torch, lambda f=f: [f() for _ in range(a.inner)]) for k, f in fns.items()}
            for k in list(fns) + list(fns)[::-1]:   # each way's graph captured once, before the first phase
                us, t0, t1 = sustained(torch, grs[k], a.sustain, a.inner)
                t[k].append(us)
                print(f'# {T}x{H}x{F} {k}: {us:.1f} us a call, wall {t0:.3f}-{t1:.3f}', flush=True)
            m = {k: sum(v) / len(v) for k, v in t.items()}
            print(f'{T:5d} {H:5d} {F:5d} | sustained ' + ' | '.join(f'{k} {m[k]:7.1f} us' for k in fns) +
                  f' | torch/engine {m["torch"] / m["engine"]:.3f} torch/baton {m["torch"] / m["baton"]:.3f}'
                  f' | wrong engine {off(torch, Ye, Y)} baton {off(torch, out, Y)}', flush=True)
            continue
        reps = max(5, min(200, int(4e5 / (2.0 * T * H * F / 5e8))))   # a few hundred ms a side at most
        t = {k: [] for k in fns}
        for r in range(a.rounds):   # turn about, the order reversed every other round
            for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                t[k].append(timed(torch, fns[k], max(reps, a.inner), True, a.inner))
        torch.cuda.synchronize()
        kd = {k: kernel_us(torch, graph_of(torch, f).replay, 10) for k, f in fns.items()}
        if a.names:
            for k, (_, names) in kd.items():
                print(f'# {T}x{H}x{F} {k}: ' + '; '.join(n[:120] for n in names), flush=True)
        print(f'{T:5d} {H:5d} {F:5d} | ' + ' | '.join(f'{k} {min(v):7.1f} us (kernel {kd[k][0]:7.1f})' for k, v in t.items())
              + f' | torch/engine {min(t["torch"]) / min(t["engine"]):.3f} torch/baton '
              f'{min(t["torch"]) / min(t["baton"]):.3f} | wrong engine {off(torch, Ye, Y)} baton {off(torch, out, Y)}',
              flush=True)
    comm.destroy()


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""The same GEMM three ways on the same tensors, each replayed from a CUDA
graph: torch.matmul (cuBLAS), baton's GEMM opcode (a one-rank
baton.gemm_alltoall: the interpreter's gemm kernel), and the GEMM tile
engine in a kernel of its own (tools/measure/gemm_engine_lib.cu, built as
its header says).  Prints per shape each one's time per call (the best of
two rounds of graph replays) and its kernel's median duration from
PyTorch's profiler, and checks the engine's and baton's outputs against
torch.matmul's (within a bf16 rounding).  What the interpreter adds to
the engine is baton's kernel less the engine's.

    BATON_ALGO_DIR=DIR python3 tools/measure/torch_gemm.py LIBBATON LIBENGINE 'T,H,F;T,H,F...'

DIR holds the one-rank GEMM + AllToAll program (baton compile
algorithms/moe_combine.lua --param ranks=1).
"""
import ctypes, json, os, sys, tempfile


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
    """The median duration of the kernels run launches over reps calls (PyTorch's profiler)."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    p.export_chrome_trace(path)
    with open(path) as f:
        d = sorted(e['dur'] for e in json.load(f)['traceEvents'] if e.get('cat') == 'kernel')
    os.unlink(path)
    return d[len(d) // 2] if d else -1


def off(torch, got, ref):
    """Elements of got off ref by more than a bf16 rounding or two."""
    return int(((got.float() - ref.float()).abs() > ref.float().abs() / 64 + 1e-2).sum())


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
    import torch
    import baton
    from torch_moe import timed   # this directory's: graph replays, the best of 3 rounds
    baton.load(sys.argv[1])
    eng = ctypes.CDLL(sys.argv[2])
    L, V = ctypes.c_long, ctypes.c_void_p
    eng.gemm_engine_prepare.argtypes = [V, L, V, L, L, L, L]
    eng.gemm_engine_run.argtypes = [V, L, ctypes.c_int, V]
    comm = baton.Comm.init_all([0])[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for T, H, F in (tuple(int(v) for v in s.split(',')) for s in sys.argv[3].split(';')):
        g = torch.Generator(device='cuda').manual_seed(1234)
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
        reps = max(5, min(200, int(4e5 / (2.0 * T * H * F / 5e8))))   # a few hundred ms a side at most
        t = {k: [] for k in fns}
        for _ in range(2):   # turn about
            for k in fns:
                t[k].append(timed(torch, fns[k], reps, True))
        torch.cuda.synchronize()
        kd = {k: kernel_us(torch, graph_of(torch, f).replay, 10) for k, f in fns.items()}
        print(f'{T:5d} {H:5d} {F:5d} | ' + ' | '.join(f'{k} {min(v):7.1f} us (kernel {kd[k]:7.1f})' for k, v in t.items())
              + f' | torch/engine {min(t["torch"]) / min(t["engine"]):.3f} torch/baton '
              f'{min(t["torch"]) / min(t["baton"]):.3f} | wrong engine {off(torch, Ye, Y)} baton {off(torch, out, Y)}',
              flush=True)
    comm.destroy()


if __name__ == '__main__':
    main()

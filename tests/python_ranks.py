"""Comm.init_rank from Python, a process per rank: the parent makes the
unique id and starts N processes (2, or the third argument) twice, each
seeing one GPU (CUDA_VISIBLE_DEVICES: rank r sees GPU r, or GPU r mod G where
the machine has G < N GPUs, the ranks then sharing them); each calls
Comm.init_rank(N, id, rank), reports its communicator's rank count and
rank, runs one gemv_allreduce (the library's gemv_allreduce.lua compiled
for N ranks by the parent, through Python, into the children's
BATON_ALGO_DIR) on device buffers of its own (small
integers, so the sum over ranks is exact) and checks y against the sum
it computes itself, then destroys the communicator.  The first time,
with no program loaded, each rank's call must be refused as unsupported,
its log saying so.  TAP; a skip without a GPU.
Usage: python3 python_ranks.py PYTHON_DIR LIBBATON [N]"""
import array
import ctypes
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
from tap import ok, skip, done

M, K = 1000, 384          # y of 1000 floats: the direct one-shot kernel's size range


def cudart():
    """The CUDA runtime libbaton.so uses, or None."""
    for name in ('libcudart.so', 'libcudart.so.13', '/usr/local/cuda/lib64/libcudart.so'):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class DevF32:
    """A float32 CUDA buffer of the given shape, seen by baton's module as a contiguous tensor."""

    class _Type:
        def __str__(self):
            return 'torch.float32'

    is_cuda = True
    dtype = _Type()

    def __init__(self, rt, values, shape):
        self.rt, self.shape = rt, shape
        self.n = len(values)
        self.p = ctypes.c_void_p()
        if rt.cudaMalloc(ctypes.byref(self.p), 4 * self.n) != 0:
            raise RuntimeError('cudaMalloc failed')
        buf = array.array('f', values)
        if rt.cudaMemcpy(self.p, buf.buffer_info()[0], ctypes.c_size_t(4 * self.n), 1) != 0:
            raise RuntimeError('cudaMemcpy to the GPU failed')

    def stride(self, i=None):
        s = (self.shape[1], 1) if len(self.shape) == 2 else (1,)
        return s if i is None else s[i]

    def data_ptr(self):
        return self.p.value

    def values(self):
        buf = array.array('f', [0.0]) * self.n
        if self.rt.cudaMemcpy(buf.buffer_info()[0], self.p, ctypes.c_size_t(4 * self.n), 2) != 0:
            raise RuntimeError('cudaMemcpy from the GPU failed')
        return buf


def w_of(r, i, j):
    return float((i * 7 + j * 3 + r) % 5 - 2)


def x_of(r, j):
    return float((j + 2 * r) % 3 - 1)


def child(libpath, n, rank, uid):
    baton.load(libpath)
    comm = baton.Comm.init_rank(n, uid, rank)
    print(f'count {comm.size()} rank {comm.rank()}', flush=True)
    rt = cudart()
    W = DevF32(rt, [w_of(rank, i, j) for i in range(M) for j in range(K)], (M, K))
    x = DevF32(rt, [x_of(rank, j) for j in range(K)], (K,))
    y = DevF32(rt, [float('nan')] * M, (M,))
    try:
        baton.gemv_allreduce(W, x, y, comm=comm, stream=0)
    except baton.BatonError as e:   # no program loaded (the first round): refused, saying why
        print(f'gemv_allreduce refused: {e}', flush=True)
        comm.destroy()
        return
    if rt.cudaDeviceSynchronize() != 0:
        raise RuntimeError('cudaDeviceSynchronize failed')
    got = y.values()
    xs = [[x_of(r, j) for j in range(K)] for r in range(n)]
    want = [sum(w_of(r, i, j) * xs[r][j] for r in range(n) for j in range(K)) for i in range(M)]
    wrong = sum(1 for a, b in zip(got, want) if a != b)
    print(f'gemv_allreduce wrong {wrong} of {M} algorithm {comm.last_algorithm()}', flush=True)
    comm.destroy()


if len(sys.argv) > 3 and sys.argv[3] == '--child':
    child(sys.argv[2], int(sys.argv[4]), int(sys.argv[5]), bytes.fromhex(sys.argv[6]))
    sys.exit(0)

n = int(sys.argv[3]) if len(sys.argv) > 3 else 2
rt = cudart()
have = ctypes.c_int(0)
if rt is None or rt.cudaGetDeviceCount(ctypes.byref(have)) != 0 or have.value < 1:
    skip(f'Comm.init_rank, {n} processes', 'no GPU')
    done()
have = have.value
where = f'{n} GPUs' if have >= n else f'{have} GPU{"s" if have > 1 else ""} shared'
baton.load(sys.argv[2])


def ranks(algs):
    """Starts the N children on the programs of folder algs (None: no BATON_ALGO_DIR); returns each rank's
    output and exit status."""
    uid = baton.Comm.unique_id()
    procs = []
    for r in range(n):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r % have))
        env.pop('BATON_ALGO_DIR', None)
        if algs:
            env['BATON_ALGO_DIR'] = algs
        env.pop('BATON_ALGO_FILES', None)
        env.pop('MSCCL_XML_FILES', None)
        env.pop('BATON_DEBUG', None)
        procs.append(subprocess.Popen([sys.executable, __file__, sys.argv[1], sys.argv[2], '--child', str(n), str(r),
                                       uid.hex()], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        outs.append((out, p.returncode))
    return outs


def show(out):
    print('# ' + out.strip()[-1200:].replace('\n', '\n# '))


# No program loaded (no BATON_ALGO_DIR): every rank's call is refused as unsupported, its log saying that no
# program of the kind is loaded.
for r, (out, rc) in enumerate(ranks(None)):
    good = rc == 0 and 'gemv_allreduce refused: baton_gemv_allreduce: unsupported' in out and \
        'no GEMV + AllReduce program is loaded' in out
    ok(good, f'rank {r} of {n} ({where}), no program loaded: gemv_allreduce refused as unsupported, the log '
             f'saying no GEMV + AllReduce program is loaded')
    if not good:
        show(out)
with tempfile.TemporaryDirectory(prefix='python_ranks.') as algs:
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'algorithms',
                          'gemv_allreduce.lua')
    baton.compile(script, os.path.join(algs, f'gemv_allreduce_{n}r.xml'), ranks=n)
    for r, (out, rc) in enumerate(ranks(algs)):
        made = rc == 0 and f'count {n} rank {r}' in out
        ok(made, f'rank {r} of {n} ({where}): Comm.init_rank in its own process made a communicator of {n} ranks, '
                 f'rank {r}')
        line = next((s for s in out.splitlines() if s.startswith('gemv_allreduce ')), '')
        ok(rc == 0 and line.startswith(f'gemv_allreduce wrong 0 of {M} '),
           f'rank {r} of {n}: gemv_allreduce {M} x {K} f32 across the processes, y exact ({line[15:] or "no result"})')
        if not (made and line):
            show(out)
done()

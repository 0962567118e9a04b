"""python/baton.py without a GPU or PyTorch: the library loads through ctypes,
every malformed call is refused before it reaches the library, and the
compiler, the CPU verifier, set_algorithms and nccl_library work.
Usage: python3 python_module.py PYTHON_DIR LIBBATON   (TAP output; the
algorithm scripts are PYTHON_DIR/../algorithms, baton's libnccl.so.2 is the
one beside LIBBATON when there is one)"""
import ctypes
import mmap
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
from tap import ok, raises, skip, done

class T:   # the part of a torch.Tensor the module uses
    def __init__(self, shape, dtype='torch.bfloat16', cuda=True, strides=None):
        self.shape, self.dtype, self.is_cuda = shape, dtype, cuda
        self._strides = strides or (tuple(shape[1:]) + (1,) if len(shape) == 2 else (1,))
    def stride(self, i): return self._strides[i]
    def data_ptr(self): return 4096
    def new_empty(self, shape): return T(shape, self.dtype)

public = sorted(n for n in vars(baton) if not n.startswith('_'))
ok(public == sorted(baton.__all__) and not {'ctypes', 'os', 'glob', 'struct', 'collections'} & set(public),
   'the module exports its API only (__all__; no ctypes, os or glob): %s' % ', '.join(public))
lib = baton.load(sys.argv[2])
ok(lib is not None and hasattr(lib, 'baton_gemv_allreduce'), 'libbaton.so loads and has baton_gemv_allreduce')
c = baton.Comm(None)
W, x = T((8, 4)), T((4,))
raises(ValueError, lambda: baton.gemv_allreduce(W, x), 'a call without a communicator is refused', 'needs comm=')
raises(ValueError, lambda: baton.gemv_allreduce(W, T((5,)), comm=c), 'x of the wrong length is refused',
       'W has 4 columns but x has 5 elements')
raises(ValueError, lambda: baton.gemv_allreduce(T((8, 4), strides=(8, 1)), x, comm=c), 'a strided W is refused',
       'must be contiguous')
raises(TypeError, lambda: baton.gemv_allreduce(T((8, 4), 'torch.int32'), T((4,), 'torch.int32'), comm=c),
       'an integer type is refused', 'take float32, float16 or bfloat16')
raises(TypeError, lambda: baton.gemv_allreduce(W, T((4,), 'torch.float32'), comm=c), 'mixed types are refused',
       'one type')
raises(ValueError, lambda: baton.gemv_allreduce(T((8, 4), cuda=False), T((4,), cuda=False), comm=c),
       'host tensors are refused', 'must be CUDA tensors')
raises(ValueError, lambda: baton.gemv_allreduce(W, x, T((7,)), comm=c), 'a y of the wrong length is refused',
       'vector of 8 elements')
raises(ValueError, lambda: baton.gemv_allreduce(W, x, T((8,), cuda=False), comm=c), 'a host y is refused',
       'CUDA vector of 8 elements')
raises(ValueError, lambda: baton.Comm.init_rank(2, b'x' * 10, 0), 'a short unique id is refused', '128 bytes')
# embedding bags + AllToAll: every check before the library is called
E, I, O = T((100, 8), 'torch.float32'), T((30,), 'torch.int64'), T((4 * 2 + 1,), 'torch.int64')
raises(ValueError, lambda: baton.embedding_alltoall(E, I, O, 4, 2), 'an embedding call without a communicator is '
       'refused', 'needs comm=')
raises(ValueError, lambda: baton.embedding_alltoall(E, I, O, 4, 2, mode='max', comm=c), 'an unknown pooling is refused',
       "mode is 'sum' or 'mean'")
raises(ValueError, lambda: baton.embedding_alltoall(E, I, O, 4, 2, weights=T((30,), 'torch.float32'), mode='mean',
       comm=c), 'weights with a mean are refused', "weights are for mode='sum'")
raises(ValueError, lambda: baton.embedding_alltoall(E, T((30,), 'torch.int32'), O, 4, 2, comm=c),
       'int32 indices are refused', 'int64 CUDA tensor')
raises(ValueError, lambda: baton.embedding_alltoall(E, I, T((8,), 'torch.int64'), 4, 2, comm=c),
       'offsets of the wrong length are refused', 'batch*tables + 1 = 9')
raises(TypeError, lambda: baton.embedding_alltoall(T((100, 8), 'torch.int32'), I, O, 4, 2, comm=c),
       'an integer table is refused', 'take float32, float16 or bfloat16')
raises(ValueError, lambda: baton.embedding_alltoall(T((100, 8), 'torch.float32', cuda=False), I, O, 4, 2, comm=c),
       'a host table is refused', '2-D CUDA tensor')
raises(ValueError, lambda: baton.embedding_alltoall(E, I, O, 4, 2, weights=T((30,), 'torch.float32', strides=(2,)),
       comm=c), 'strided weights (a column of a matrix) are refused', 'contiguous CUDA vector')
raises(ValueError, lambda: baton.embedding_alltoall(E, I, O, 4, 2, weights=T((30,), 'torch.float32', cuda=False),
       comm=c), 'host weights are refused', 'contiguous CUDA vector')
# GEMM + AllToAll: every check before the library is called
X, Wm = T((64, 128)), T((128, 256))
raises(ValueError, lambda: baton.gemm_alltoall(X, Wm), 'a GEMM call without a communicator is refused', 'needs comm=')
raises(ValueError, lambda: baton.gemm_alltoall(X, T((64, 256)), comm=c), 'X columns that are not W rows are refused',
       'X has 128 columns but W has 64 rows')
raises(ValueError, lambda: baton.gemm_alltoall(T((64,)), Wm, comm=c), 'a 1-D X is refused', 'must be 2-D')
raises(TypeError, lambda: baton.gemm_alltoall(T((64, 128), 'torch.float32'), Wm, comm=c), 'an f32 X is refused',
       'takes bfloat16')
raises(ValueError, lambda: baton.gemm_alltoall(X, T((128, 256), cuda=False), comm=c), 'a host W is refused',
       'must be CUDA tensors')
raises(ValueError, lambda: baton.gemm_alltoall(X, Wm, comm=c, counts=T((2,), 'torch.int64')),
       'int64 counts are refused', 'int32 CUDA tensor')
raises(ValueError, lambda: baton.gemm_alltoall(X, Wm, comm=c, counts=T((2,), 'torch.int32', cuda=False)),
       'host counts are refused', 'int32 CUDA tensor')
raises(ValueError, lambda: baton.gemm_alltoall(X, Wm, comm=c, counts=T((2, 1), 'torch.int32')),
       '2-D counts are refused', '1-D contiguous')
raises(ValueError, lambda: c.register(T((64,), cuda=False)), 'registering host memory is refused', 'CUDA tensor')
class Strided(T):
    def is_contiguous(self): return False
raises(ValueError, lambda: c.register(Strided((8, 4))), 'registering a strided tensor is refused', 'contiguous')
# The compiler, the verifier and the algorithm set: no GPU needed.
def raised(kind, fn):
    try:
        fn()
    except kind as e:
        return e
    return None

algs = os.path.join(sys.argv[1], '..', 'algorithms')
tmp = tempfile.mkdtemp(prefix='baton_python_')
ok(baton.nccl_library() == [], 'nccl_library() is [] in a process that loaded no NCCL')
baton.set_algorithms(dir=tmp)
ok(os.environ.get('BATON_ALGO_DIR') == os.path.abspath(tmp) and 'BATON_ALGO_FILES' not in os.environ,
   'set_algorithms(dir=) sets BATON_ALGO_DIR and removes BATON_ALGO_FILES')
ring = os.path.join(tmp, 'ring4.xml')
e = raised(Exception, lambda: ok(baton.compile(os.path.join(algs, 'allreduce_ring.lua'), ring, ranks=4) == ring,
                                 'compile(allreduce_ring.lua, ranks=4) returns the output path'))
if e: ok(False, f'compile(allreduce_ring.lua, ranks=4): {type(e).__name__}: {e}')
text = open(ring).read() if os.path.exists(ring) else ''
ok('ngpus="4"' in text and 'coll="allreduce"' in text, 'it wrote a 4-rank AllReduce')
script = os.path.join(tmp, 'script.lua')
with open(script, 'w') as f:
    f.write('collective{ kind = "allreduce", ranks = 2 }\nlocal x = nil + 1\n')
raises(baton.BatonError, lambda: baton.compile(script, os.path.join(tmp, 'bad.xml')),
       'a script error raises BatonError naming the script line', 'script.lua:2: attempt to perform arithmetic')
e = raised(baton.BatonError, lambda: baton.compile(script, os.path.join(tmp, 'bad.xml')))
ok(e is not None and e.code == 1 and e.detail.startswith(script + ':2:') and
   not os.path.exists(os.path.join(tmp, 'bad.xml')), 'its code is invalid argument, .detail the diagnostic, '
   'nothing written')
raises(baton.BatonError, lambda: baton.compile(os.path.join(algs, 'allreduce_ring.lua'), os.path.join(tmp, 'x.xml'),
       rank=4), 'a parameter the script never reads is refused', '--param rank is never read')
raises(baton.BatonError, lambda: baton.compile(os.path.join(tmp, 'missing.lua'), os.path.join(tmp, 'x.xml')),
       'a missing script is refused, named', 'missing.lua')
raises(baton.BatonError, lambda: baton.compile(tmp, os.path.join(tmp, 'x.xml')), 'a folder is refused',
       'is a directory, not a Lua script')
raises(baton.BatonError, lambda: baton.compile(os.path.join(algs, 'allreduce_ring.lua'),
       os.path.join(tmp, 'no', 'such', 'x.xml'), ranks=2), 'an output that cannot be written is refused',
       'cannot write')
# The compiler runs as a child process: this process's parameters are still unread.
e = raised(Exception, lambda: baton.set_algorithms(files=[ring]))
ok(e is None and os.environ.get('BATON_ALGO_FILES') == ring and 'BATON_ALGO_DIR' not in os.environ,
   'set_algorithms(files=) after compile sets BATON_ALGO_FILES and removes BATON_ALGO_DIR' + (f' ({e})' if e else ''))
raises(FileNotFoundError, lambda: baton.set_algorithms(files=[os.path.join(tmp, 'none.xml')]),
       'set_algorithms with a missing file is refused', 'none.xml is not a file')
raises(NotADirectoryError, lambda: baton.set_algorithms(dir=ring), 'set_algorithms with a file for dir is refused',
       'is not a folder')
raises(ValueError, lambda: baton.set_algorithms(), 'set_algorithms with nothing is refused', 'needs dir=')
e = raised(Exception, lambda: ok(baton.verify(ring) is True, 'verify(the compiled ring) is True'))
if e: ok(False, f'verify(the compiled ring): {type(e).__name__}: {e}')
cut = os.path.join(tmp, 'cut.xml')
with open(cut, 'w') as f:
    f.write(text[:len(text) // 2])
e = raised(baton.BatonError, lambda: baton.verify(cut))
ok(e is not None and e.code == 1 and re.search(re.escape(cut) + r':\d+: ', str(e)),
   'verify of a truncated file fails naming the file and line' + (f' ({str(e).splitlines()[1]})' if e else ''))
wrong = os.path.join(tmp, 'wrong.xml')
step = '<step s="6" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1"'
with open(wrong, 'w') as f:   # rank 0 receives its last chunk into another one
    f.write(text.replace(step, step.replace('off="1"', 'off="0"'), 1))
e = raised(baton.BatonError, lambda: baton.verify(wrong))
ok(step in text and e is not None and e.code == 5 and 'wrong.xml: WRONG RESULT' in str(e),
   f'verify of a program that computes the wrong sum fails: wrong result ({str(e).splitlines()[0] if e else None})')
noop = os.path.join(tmp, 'noop.xml')   # an AllToAll that moves no block: each rank copies its input to its output
with open(noop, 'w') as f:
    f.write('<algo name="noop" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0">\n' +
            ''.join(f'<gpu id="{r}" i_chunks="2" o_chunks="2" s_chunks="0"><tb id="0" send="-1" recv="-1" chan="0">'
                    '<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" '
                    'hasdep="0" /></tb></gpu>\n' for r in range(2)) + '</algo>\n')
e = raised(baton.BatonError, lambda: baton.verify(noop))
ok(e is not None and e.code == 5 and 'noop.xml: WRONG ROUTE' in str(e),
   'verify of an AllToAll that moves no block fails, at the default count where its values alone would match: wrong '
   f'route ({str(e).splitlines()[0] if e else None})')
raises(ValueError, lambda: baton.verify(os.path.join(tmp, 'f.xml\0junk')), 'a path with a NUL is refused (C would '
       'verify f.xml)', 'holds a NUL character')
raises(ValueError, lambda: baton.compile('a.lua\0b', os.path.join(tmp, 'x.xml')), 'a script path with a NUL is refused',
       'holds a NUL character')
raises(baton.BatonError, lambda: baton.verify(os.path.join(tmp, 'none.xml')), 'verify of a missing file names it',
       'none.xml')
moe = os.path.join(tmp, 'moe2.xml')
e = raised(Exception, lambda: ok(baton.verify(baton.compile(os.path.join(algs, 'moe_combine.lua'), moe, ranks=2)),
                                 'verify of a fused program with gemm steps runs it at dimensions that fit'))
if e: ok(False, f'verify of the GEMM + AllToAll program: {type(e).__name__}: {e}')
# A custom collective, with the options baton verify takes: AllToNext on 2 ranks, its postcondition given.
a2n = baton.compile(os.path.join(algs, 'alltonext.lua'), os.path.join(tmp, 'a2n.xml'), nodes=2, gpus=1)
rule = 'o[r][c]=i[r-1][c] if r>=1'
e = raised(Exception, lambda: ok(baton.verify(a2n, expect=rule, inplace=False, count=1000),
                                 'verify(expect=..., inplace=False, count=...) of a custom collective'))
if e: ok(False, f'verify of AllToNext with its rule: {type(e).__name__}: {e}')
e = raised(baton.BatonError, lambda: baton.verify(a2n, expect='o[r][c]=i[r][c] if r>=1', inplace=False))
ok(e is not None and e.code == 5, f'a wrong rule is a wrong result ({str(e).splitlines()[0] if e else None})')
raises(baton.BatonError, lambda: baton.verify(ring, expect=rule), 'expect with a built-in collective is refused',
       'own postcondition')
raises(ValueError, lambda: baton.verify(ring, count=0), 'count 0 is refused', 'positive integer')
raises(RuntimeError, lambda: baton.set_algorithms(dir=tmp), 'set_algorithms after verify (parameters read) is '
       'refused', 'too late')
ok(baton.Comm(None).algorithms() == [], 'Comm.algorithms() of no communicator is []')
# nccl_library: a libnccl.so.2 that is not baton's, then baton's drop-in.
os.mkdir(os.path.join(tmp, 'other'))
other = os.path.join(tmp, 'other', 'libnccl.so.2')
with open(other, 'wb') as f:
    f.write(b'\x7fELF: not an NCCL at all\n' * 4096)
with open(other, 'rb') as f:
    mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
libs = baton.nccl_library()
ok(libs == [baton.NcclLibrary(os.path.realpath(other), False)], f'a libnccl.so.2 that is not baton\'s: {libs}')
mapped.close()
drop = os.path.join(os.path.dirname(os.path.realpath(sys.argv[2])), 'libnccl.so.2')
if os.path.exists(drop):
    ctypes.CDLL(drop)
    libs = baton.nccl_library()
    ok(libs == [baton.NcclLibrary(os.path.realpath(drop), True)], f'baton\'s drop-in loaded: {libs}')
else:
    skip('baton\'s drop-in loaded', f'no {drop}')
shutil.rmtree(tmp)

try:   # on a machine without a GPU, baton says so with its own error
    comms = baton.Comm.init_all([0])
    ok(True, 'a communicator on GPU 0 (a GPU is present)')
    ok(all(isinstance(a, str) for a in comms[0].algorithms()), 'Comm.algorithms() lists names')
    for cm in comms: cm.destroy()
except baton.BatonError as e:   # no GPU (3, 7, 8), or a library built without CUDA (6)
    ok(e.code in (3, 6, 7, 8), f'no GPU: init_all fails with baton\'s error ({e})')
# The id goes by value, as baton.h takes it (a ctypes array went as a pointer: the library read the rank from
# the pointer and the id from stack garbage, and always answered "invalid argument"). Rank 0 of 1 passes the
# argument checks: a communicator where a GPU is, else a CUDA error.  (Last: it reads the parameters, which
# set_algorithms above must precede.)
try:
    one = baton.Comm.init_rank(1, baton.Comm.unique_id(), 0)
    ok(True, 'Comm.init_rank(1, id, 0) makes a communicator of one rank')
    one.destroy()
except baton.BatonError as e:
    ok(e.code in (6, 7), f'Comm.init_rank(1, id, 0) gets past its argument checks: without a GPU a CUDA error, '
       f'unsupported from a library built without CUDA ({e})')
done()

"""python/baton.py with real PyTorch tensors on the CPU (Debian's python3-torch has no CUDA): host tensors are
refused, and real torch.Size, torch.dtype and strides are read right -- through a view that claims to be on the
GPU, every malformed call is refused before the library, and a well-formed one reaches it (which refuses the
missing communicator) without crashing.  Usage: python3 python_torch.py PYTHON_DIR LIBBATON   (TAP output)"""
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
import torch
from tap import ok, raises, done

class OnGpu:
    """A real tensor seen as a CUDA one: everything the module reads comes from the tensor itself."""

    def __init__(self, t):
        self.t = t

    is_cuda = True
    shape = property(lambda self: self.t.shape)
    dtype = property(lambda self: self.t.dtype)

    def stride(self, i=None):
        return self.t.stride() if i is None else self.t.stride(i)

    def data_ptr(self):
        return self.t.data_ptr()

    def dim(self):
        return self.t.dim()

    def new_empty(self, shape):
        return OnGpu(self.t.new_empty(shape))


baton.load(sys.argv[2])
c = baton.Comm(None)
bf = torch.bfloat16
W, x = torch.ones(8, 4, dtype=bf), torch.ones(4, dtype=bf)
raises(ValueError, lambda: baton.gemv_allreduce(W, x, comm=c), 'CPU tensors are refused by gemv_allreduce',
       'must be CUDA tensors')
raises(ValueError, lambda: baton.embedding_alltoall(torch.ones(100, 8), torch.zeros(30, dtype=torch.int64),
                                                    torch.zeros(9, dtype=torch.int64), 4, 2, comm=c),
       'CPU tensors are refused by embedding_alltoall', 'CUDA tensor')
raises(ValueError, lambda: baton.gemm_alltoall(torch.ones(64, 128, dtype=bf), torch.ones(128, 256, dtype=bf), comm=c),
       'CPU tensors are refused by gemm_alltoall', 'must be CUDA tensors')

G = OnGpu
raises(ValueError, lambda: baton.gemv_allreduce(G(W), G(torch.ones(5, dtype=bf)), comm=c),
       'a torch.Size is read: x of the wrong length', 'W has 4 columns but x has 5 elements')
raises(ValueError, lambda: baton.gemv_allreduce(G(torch.ones(4, 8, dtype=bf).t()), G(x), comm=c),
       'real strides are read: a transposed W', 'must be contiguous')
for dt, name in ((torch.int32, 'int32'), (torch.float64, 'float64'), (torch.int8, 'int8')):
    raises(TypeError, lambda: baton.gemv_allreduce(G(W.to(dt)), G(x.to(dt)), comm=c),
           f'a real torch.{name} is refused', 'take float32, float16 or bfloat16')
raises(TypeError, lambda: baton.gemv_allreduce(G(W), G(x.float()), comm=c), 'mixed real dtypes are refused', 'one type')
raises(TypeError, lambda: baton.gemm_alltoall(G(torch.ones(64, 128)), G(torch.ones(128, 256)), comm=c),
       'float32 is refused by gemm_alltoall', 'takes bfloat16')
raises(ValueError, lambda: baton.embedding_alltoall(G(torch.ones(100, 8)), G(torch.zeros(30, dtype=torch.int32)),
                                                    G(torch.zeros(9, dtype=torch.int64)), 4, 2, comm=c),
       'real int32 indices are refused', 'int64 CUDA tensor')
# Well formed in every type the module takes: the call reaches libbaton, which refuses the missing communicator.
for dt in (torch.float32, torch.float16, torch.bfloat16):
    e = None
    try:
        baton.gemv_allreduce(G(W.to(dt)), G(x.to(dt)), G(torch.empty(8, dtype=dt)), comm=c, stream=0)
    except baton.BatonError as err:
        e = err
    ok(e is not None and e.code == 1, f'a well-formed {dt} gemv_allreduce reaches the library: '
       f'{e if e else "no error"}')
done()

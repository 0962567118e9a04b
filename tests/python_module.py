"""python/baton.py without a GPU or PyTorch: the library loads through ctypes,
and every malformed call is refused before it reaches the library.
Usage: python3 python_module.py PYTHON_DIR LIBBATON   (TAP output)"""
import sys

sys.path.insert(0, sys.argv[1])
import baton

n = 0
failed = 0

def ok(cond, what):
    global n, failed
    n += 1
    failed += not cond
    print(('ok' if cond else 'not ok') + f' {n} - {what}')

class T:   # the part of a torch.Tensor the module uses
    def __init__(self, shape, dtype='torch.bfloat16', cuda=True, strides=None):
        self.shape, self.dtype, self.is_cuda = shape, dtype, cuda
        self._strides = strides or (tuple(shape[1:]) + (1,) if len(shape) == 2 else (1,))
    def stride(self, i): return self._strides[i]
    def data_ptr(self): return 4096
    def new_empty(self, shape): return T(shape, self.dtype)

def raises(kind, fn, what, text):
    try:
        fn()
    except kind as e:
        ok(text in str(e), f'{what} ({e})')
        return
    except Exception as e:
        ok(False, f'{what}: raised {type(e).__name__}: {e}')
        return
    ok(False, f'{what}: nothing raised')

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
try:   # on a machine without a GPU, baton says so with its own error
    comms = baton.Comm.init_all([0])
    ok(True, 'a communicator on GPU 0 (a GPU is present)')
    for cm in comms: cm.destroy()
except baton.BatonError as e:
    ok(e.code in (3, 7, 8), f'no GPU: init_all fails with baton\'s error ({e})')
print(f'1..{n}')
sys.exit(1 if failed else 0)

"""baton -- fused GEMV + AllReduce, fused embedding bags + AllToAll (and
baton's communicators) for PyTorch, over baton's C library through ctypes:
no compiled extension.

    import torch, baton
    comm = baton.Comm.init_rank(world, uid, rank)      # or Comm.init_all([0, 1, ...])
    y = baton.gemv_allreduce(W, x, comm=comm)          # y = sum over ranks of W_r @ x_r
    out = baton.embedding_alltoall(E, indices, offsets, batch=B, tables=T, comm=comm)   # [B/n, n*T*D]

and, with no GPU and no PyTorch, the compiler and the CPU verifier:

    baton.set_algorithms(dir='algs')                   # what communicators load (before any other call)
    baton.compile('algorithms/allreduce_ring.lua', 'algs/ring4.xml', ranks=4)   # script -> verified IR
    baton.verify('algs/ring4.xml')                     # True, or BatonError naming the file and the problem
    baton.verify('a2n.xml', expect='o[r][c]=i[r-1][c] if r>=1', inplace=False)   # a custom collective's rule
    baton.nccl_library()                               # is the libnccl.so.2 in this process baton's?

Tensors are CUDA tensors of float32, float16 or bfloat16 (anything with
data_ptr(), shape, stride(), dtype and is_cuda works); calls are
asynchronous on the current CUDA stream of the tensors' device (or the
stream given), so they can be captured in CUDA graphs.  baton chooses the
fused program from those it loaded (BATON_ALGO_DIR, docs/FUSED.md).

The library: baton.load(path) before anything else, else libbaton.so from
beside this file's folder's build/ (a source checkout), else the one
installed with this module (meson install writes its folder in here), else
the one the loader finds (LD_LIBRARY_PATH, the system's).  A build without
CUDA has a libbaton.so too: compile and verify work, communicators answer
BatonError (unsupported).
"""
import collections as _collections
import ctypes as _ctypes
import ctypes.util as _ctypes_util
import os as _os
import struct as _struct

__all__ = ['BatonError', 'NcclLibrary', 'load', 'version', 'compile', 'verify', 'set_algorithms', 'nccl_library', 'Comm', 'group',
           'gemv_allreduce', 'embedding_alltoall', 'gemm_alltoall']

_DTYPES = {'torch.float32': 0, 'torch.float16': 2, 'torch.bfloat16': 3}   # baton_f32, baton_f16, baton_bf16
_RESULTS = ['success', 'invalid argument', 'out of memory', 'system error', 'deadlock', 'wrong result',
            'unsupported', 'CUDA error', 'internal error', 'timeout', 'aborted', 'remote peer lost']
_lib = None
# Set before the first call that makes libbaton read its environment parameters (BATON_ALGO_DIR and the
# others: once per process, runtime/base/rt_param.c); set_algorithms is refused after it.
_params_read = None


class BatonError(RuntimeError):
    """A baton call failed; .code is baton's result (baton.h), the message says which call and why (baton
    logs details at WARN); .detail is the library's diagnostic where it gives one (compile, verify: the
    file and line of each problem), also in the message."""

    def __init__(self, call, code, detail=None):
        self.code = code
        if detail and detail.startswith(call + ': '):   # the library names the call itself
            detail = detail[len(call) + 2:]
        self.detail = detail
        what = _RESULTS[code] if 0 <= code < len(_RESULTS) else f'result {code}'
        super().__init__(f'{call}: {what}' + (f': {detail}' if detail else ''))


# The folder `meson install` put libbaton.so in: the installed copy of this
# file has it written here; a source checkout's keeps the placeholder.
_INSTALLED_LIBDIR = '@BATON_LIBDIR@'


def load(path=None):
    """Loads baton's C library (libbaton.so) from path, or finds it; returns the ctypes library."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    here = _os.path.dirname(_os.path.abspath(__file__))
    installed = [] if _INSTALLED_LIBDIR.startswith('@') else [_os.path.join(_INSTALLED_LIBDIR, 'libbaton.so.0')]
    candidates = [path] if path else [_os.path.join(here, '..', 'build', 'libbaton.so')] + installed + [
        'libbaton.so.0', _ctypes_util.find_library('baton')]
    errors = []
    for c in candidates:
        if not c:
            continue
        try:
            lib = _ctypes.CDLL(c)
        except OSError as e:
            errors.append(f'{c}: {e}')
            continue
        _declare(lib)
        _lib = lib
        return lib
    raise OSError('baton: cannot load libbaton.so (' + '; '.join(errors or ['not found']) +
                  '): call baton.load(PATH) with the library built by meson (build/libbaton.so)')


def version():
    """baton's version, from the library loaded (baton_version)."""
    return load().baton_version().decode()


class _UniqueId(_ctypes.Structure):
    """baton_unique_id as baton.h declares it: a struct of 128 bytes, passed by value
    (a ctypes array would go as a pointer)."""
    _fields_ = [('bytes', _ctypes.c_char * 128)]


class _VerifyOpts(_ctypes.Structure):
    """baton.h's baton_verify_opts."""
    _fields_ = [('expect', _ctypes.c_char_p), ('placement', _ctypes.c_int), ('count', _ctypes.c_longlong)]


def _declare(lib):
    P, I, Z, U = _ctypes.c_void_p, _ctypes.c_int, _ctypes.c_size_t, _UniqueId
    lib.baton_comm_init_all.argtypes = [_ctypes.POINTER(P), I, _ctypes.POINTER(I)]
    lib.baton_get_unique_id.argtypes = [_ctypes.POINTER(U)]
    lib.baton_comm_init_rank.argtypes = [_ctypes.POINTER(P), I, U, I]
    lib.baton_comm_destroy.argtypes = [P]
    lib.baton_gemv_allreduce.argtypes = [P, P, P, P, Z, Z, I, P]
    lib.baton_embedding_alltoall.argtypes = [P, P, Z, Z, Z, P, Z, P, P, Z, Z, I, P, I, P]
    lib.baton_gemm_alltoall.argtypes = [P, P, Z, P, Z, P, P, Z, Z, Z, I, P]
    lib.baton_version.argtypes = []
    lib.baton_version.restype = _ctypes.c_char_p
    lib.baton_comm_last_algorithm.argtypes = [P]
    lib.baton_comm_last_algorithm.restype = _ctypes.c_char_p
    lib.baton_comm_count.argtypes = [P, _ctypes.POINTER(I)]
    lib.baton_comm_count.restype = I
    lib.baton_comm_user_rank.argtypes = [P, _ctypes.POINTER(I)]
    lib.baton_comm_user_rank.restype = I
    lib.baton_comm_algorithm_count.argtypes = [P]
    lib.baton_comm_algorithm_count.restype = I
    lib.baton_comm_algorithm_name.argtypes = [P, I]
    lib.baton_comm_algorithm_name.restype = _ctypes.c_char_p
    lib.baton_comm_register.argtypes = [P, P, Z, _ctypes.POINTER(P)]
    lib.baton_comm_deregister.argtypes = [P, P]
    S = _ctypes.c_char_p
    if hasattr(lib, 'baton_compile'):   # a library older than these two has neither
        lib.baton_compile.argtypes = [S, _ctypes.POINTER(S), I, S, _ctypes.c_char_p, Z]
        lib.baton_compile.restype = I
        lib.baton_verify.argtypes = [S, _ctypes.c_char_p, Z]
        lib.baton_verify.restype = I
    if hasattr(lib, 'baton_verify_with'):
        lib.baton_verify_with.argtypes = [S, _ctypes.POINTER(_VerifyOpts), _ctypes.c_char_p, Z]
        lib.baton_verify_with.restype = I
    for f in (lib.baton_comm_init_all, lib.baton_get_unique_id, lib.baton_comm_init_rank, lib.baton_comm_destroy,
              lib.baton_gemv_allreduce, lib.baton_embedding_alltoall, lib.baton_gemm_alltoall, lib.baton_group_start,
              lib.baton_group_end, lib.baton_comm_register, lib.baton_comm_deregister):
        f.restype = I


def _check(call, code):
    if code != 0:
        raise BatonError(call, code)


def _reads_params(call):
    """Notes that `call` is about to make libbaton read its environment parameters."""
    global _params_read
    if _params_read is None:
        _params_read = call


def _tool(lib, name):
    if not hasattr(lib, name):
        raise OSError(f'baton: the library loaded has no {name} (it is older than this module): '
                      'call baton.load(PATH) with a newer libbaton.so')
    return getattr(lib, name)


_ERR_BYTES = 8192   # of the diagnostic baton_compile and baton_verify give back


def _cpath(path, what):
    """path as the C library takes it: bytes without a NUL (C would stop there: 'f.xml\\0junk' is not f.xml)."""
    b = _os.fsencode(path)
    if b'\0' in b:
        raise ValueError(f'baton: {what} {path!r} holds a NUL character')
    return b


def compile(script, out, **params):
    """Compiles the algorithm script (Lua, docs/DSL.md) with its parameters (ranks=4, ...: what param() reads
    in the script) into verified IR at `out`, as `baton compile SCRIPT --param K=V ... -o OUT`: traced,
    lowered, validated (races and deadlock included) and run on the CPU executor before it is written.
    Returns out.  Raises BatonError whose message holds the diagnostic ("script.lua:LINE: message" for an
    error in the script).  Compiles in this process through the compiler library installed beside libbaton
    (libbaton_compile, over the system's shared Lua), else through the baton program as a child process;
    either way it does not fix the runtime's environment parameters (set_algorithms may still follow)."""
    lib = load()
    fn = _tool(lib, 'baton_compile')
    items = [f'{k}={int(v) if isinstance(v, bool) else v}'.encode() for k, v in params.items()]
    if any(b'\0' in i for i in items):
        raise ValueError('baton: a compile parameter holds a NUL character')
    arr = (_ctypes.c_char_p * max(len(items), 1))(*items)
    err = _ctypes.create_string_buffer(_ERR_BYTES)
    code = fn(_cpath(script, 'script'), arr, len(items), _cpath(out, 'output path'), err, len(err))
    if code:
        raise BatonError('baton_compile', code, err.value.decode(errors='replace'))
    return out


def verify(path, expect=None, inplace=None, count=None):
    """Validates the IR file at path (its XML, the program's rules, races, deadlock freedom) and runs it for all
    ranks on the CPU executor against its collective's postcondition (f32 sum, 4099 elements per block; a fused
    program at dimensions and a count that fit it: the run of `baton verify FILE`).  expect: a custom
    collective's postcondition (`baton verify --expect`), e.g. 'o[r][c]=i[r-1][c] if r>=1'; inplace: True or
    False to run it in or out of place (None: the program's own); count: elements per block.  Returns True, or
    raises BatonError whose message names the file and the problem.  The first call reads libbaton's
    environment parameters (see set_algorithms)."""
    lib = load()
    err = _ctypes.create_string_buffer(_ERR_BYTES)
    _reads_params('baton.verify')
    if expect is None and inplace is None and count is None:
        code = _tool(lib, 'baton_verify')(_cpath(path, 'path'), err, len(err))
    else:
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise ValueError('baton.verify: count must be a positive integer, not %r' % (count,))
        if inplace not in (None, True, False):
            raise ValueError('baton.verify: inplace must be True, False or None, not %r' % (inplace,))
        opts = _VerifyOpts(_cpath(expect, 'expect') if expect is not None else None,
                           0 if inplace is None else 1 if inplace else 2, count or 0)
        code = _tool(lib, 'baton_verify_with')(_cpath(path, 'path'), _ctypes.byref(opts), err, len(err))
    if code:
        raise BatonError('baton_verify', code, err.value.decode(errors='replace'))
    return True


def set_algorithms(dir=None, files=None):
    """Names the IR programs communicators load: a folder whose *.xml files are loaded (BATON_ALGO_DIR) and/or
    files (BATON_ALGO_FILES: a path or a list of paths), set in _os.environ; a variable whose argument is None
    is removed, so that exactly what is named here loads (MSCCL_XML_FILES is left as it is).  libbaton reads
    its environment parameters once per process, at the first call that needs one: set_algorithms must come
    before this module's first verify, Comm or group call, and raises RuntimeError after one.  (Calls made to
    the library without this module, and baton's libnccl.so.2, which reads its own at its first call, are not
    seen here.)"""
    if dir is None and files is None:
        raise ValueError('baton: set_algorithms needs dir= (a folder of IR files) or files= (IR files)')
    if _params_read is not None:
        raise RuntimeError(f'baton: set_algorithms comes too late: libbaton read its environment parameters '
                           f'(BATON_ALGO_DIR, ...) at this process\'s first {_params_read} call, and reads them '
                           f'once; call set_algorithms before it, or set the variables before starting Python')
    env = {}
    if dir is not None:
        if not _os.path.isdir(dir):
            raise NotADirectoryError(f'baton: set_algorithms: {dir} is not a folder')
        env['BATON_ALGO_DIR'] = _os.path.abspath(dir)
    if files is not None:
        files = [files] if isinstance(files, (str, bytes, _os.PathLike)) else list(files)
        paths = []
        for f in files:
            f = _os.fsdecode(f)
            if not _os.path.isfile(f):
                raise FileNotFoundError(f'baton: set_algorithms: {f} is not a file')
            if ':' in _os.path.abspath(f):
                raise ValueError(f'baton: set_algorithms: {f}: BATON_ALGO_FILES is colon-separated, so a path '
                                 'cannot hold a colon')
            paths.append(_os.path.abspath(f))
        env['BATON_ALGO_FILES'] = ':'.join(paths)
    for var in ('BATON_ALGO_DIR', 'BATON_ALGO_FILES'):
        if var in env:
            _os.environ[var] = env[var]
        else:
            _os.environ.pop(var, None)


NcclLibrary = _collections.namedtuple('NcclLibrary', 'path is_baton')
NcclLibrary.__doc__ = ('A libnccl.so* mapped into this process: its path, and whether it is baton\'s drop-in '
                       '(True), another NCCL (False) or cannot be read to tell (None).')
# A string of baton's parameter table, in the read-only data of baton's libnccl.so.2 and of no real NCCL.
_BATON_MARKER = b'BATON_ALGO_DIR'


def _elf_rodata(f):
    """(offset, size) of an ELF file's .rodata section, or None."""
    f.seek(0)
    h = f.read(64)
    if len(h) < 64 or h[:4] != b'\x7fELF' or h[4] != 2 or h[5] != 1:   # 64-bit little-endian only
        return None
    shoff, = _struct.unpack_from('<Q', h, 0x28)
    shentsize, shnum, shstrndx = _struct.unpack_from('<HHH', h, 0x3A)
    if shentsize < 64 or not 0 < shnum < 65536 or shstrndx >= shnum:
        return None
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    if len(table) < shentsize * shnum:
        return None
    sections = [_struct.unpack_from('<IIQQQQ', table, i * shentsize) for i in range(shnum)]
    _, _, _, _, stroff, strsize = sections[shstrndx]
    f.seek(stroff)
    names = f.read(min(strsize, 1 << 20))
    for name, _, _, _, off, size in sections:
        if names[name:names.find(b'\0', name)] == b'.rodata':
            return off, size
    return None


def _has_marker(path):
    """Whether the file holds _BATON_MARKER (in its .rodata when it is an ELF file with one); None when it cannot
    be read."""
    try:
        with open(path, 'rb') as f:
            span = _elf_rodata(f)
            start, left = span if span else (0, _os.fstat(f.fileno()).st_size)
            f.seek(start)
            tail, step = b'', 1 << 22
            while left > 0:
                block = f.read(min(step, left))
                if not block:
                    break
                left -= len(block)
                if _BATON_MARKER in tail + block:
                    return True
                tail = block[-len(_BATON_MARKER):]
            return False
    except OSError:
        return None


def nccl_library():
    """Which NCCL this process has loaded (for a program using torch.distributed, say, after its process group
    was made): a list of NcclLibrary(path, is_baton), one per libnccl.so* file mapped into the process (from
    /proc/self/maps), in the order they appear; is_baton is True for baton's drop-in (docs/NCCL.md), False for
    another NCCL (the real one, which the drop-in itself loads to forward what baton does not run), None when
    the file cannot be read (deleted, or no permission).  [] when no NCCL is loaded.  Linux only."""
    seen = []
    with open('/proc/self/maps') as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 6:
                continue
            path = fields[5].rstrip('\n')
            if path.endswith(' (deleted)'):
                path = path[:-len(' (deleted)')]
            if _os.path.basename(path).startswith('libnccl.so') and path not in seen:
                seen.append(path)
    return [NcclLibrary(p, _has_marker(p)) for p in seen]


class Comm:
    """A baton communicator: one rank of a group of GPUs."""

    def __init__(self, handle):
        self._h = _ctypes.c_void_p(handle)

    @staticmethod
    def init_all(devices):
        """One communicator per entry of `devices` (CUDA device ordinals; one may repeat for tests on fewer
        GPUs than ranks), all driven by this process; returns the list, rank i first."""
        lib = load()
        _reads_params('baton.Comm.init_all')
        n = len(devices)
        out = (_ctypes.c_void_p * n)()
        devs = (_ctypes.c_int * n)(*devices)
        _check('baton_comm_init_all', lib.baton_comm_init_all(out, n, devs))
        return [Comm(out[i]) for i in range(n)]

    @staticmethod
    def unique_id():
        """128 bytes that rank 0 makes and every rank passes to init_rank (send them with
        torch.distributed.broadcast_object_list, a file, ...)."""
        lib = load()
        _reads_params('baton.Comm.unique_id')
        uid = _UniqueId()
        _check('baton_get_unique_id', lib.baton_get_unique_id(_ctypes.byref(uid)))
        return bytes(uid)

    @staticmethod
    def init_rank(nranks, uid, rank):
        """Rank `rank` of `nranks`, one process per GPU, on the current CUDA device."""
        lib = load()
        if len(uid) != 128:
            raise ValueError('baton: a unique id is 128 bytes (Comm.unique_id())')
        _reads_params('baton.Comm.init_rank')
        h = _ctypes.c_void_p()
        _check('baton_comm_init_rank',
               lib.baton_comm_init_rank(_ctypes.byref(h), nranks, _UniqueId.from_buffer_copy(uid), rank))
        return Comm(h.value)

    def size(self):
        """How many ranks the communicator has."""
        n = _ctypes.c_int()
        _check('baton_comm_count', load().baton_comm_count(self._h, _ctypes.byref(n)))
        return n.value

    def rank(self):
        """This communicator's rank."""
        r = _ctypes.c_int()
        _check('baton_comm_user_rank', load().baton_comm_user_rank(self._h, _ctypes.byref(r)))
        return r.value

    def last_algorithm(self):
        """The program the last call of this communicator ran."""
        s = load().baton_comm_last_algorithm(self._h)
        return s.decode() if s else None

    def algorithms(self):
        """The names of the programs this communicator loaded (each its IR name, else its file)."""
        lib = load()
        names = (lib.baton_comm_algorithm_name(self._h, i) for i in range(lib.baton_comm_algorithm_count(self._h)))
        return [n.decode() for n in names if n]

    def register(self, tensor):
        """Registers a CUDA tensor's memory with this communicator as a window (collective: every rank calls it,
        in the same order, with a contiguous tensor of the same size).  Calls whose buffers lie in windows reach
        their peers' buffers directly, eager ones too: with a process per GPU, a fused AllToAll whose output is
        in a window stores its rows straight into the peers' outputs (every rank passing its output at the same
        offset of the same window).  Returns the window, for deregister."""
        if not getattr(tensor, 'is_cuda', False):
            raise ValueError('baton: register takes a CUDA tensor (memory the peers can map)')
        if not tensor.is_contiguous():
            raise ValueError('baton: register takes a contiguous tensor')
        w = _ctypes.c_void_p()
        nbytes = tensor.numel() * tensor.element_size()
        _check('baton_comm_register', load().baton_comm_register(self._h, tensor.data_ptr(), nbytes, _ctypes.byref(w)))
        return w.value

    def deregister(self, window):
        """Ends a window (collective, as register); calls already enqueued keep their mappings."""
        _check('baton_comm_deregister', load().baton_comm_deregister(self._h, window))

    def destroy(self):
        if self._h:
            _check('baton_comm_destroy', load().baton_comm_destroy(self._h))
            self._h = None


class group:
    """Calls made inside `with baton.group():` are launched together at its end (as NCCL's groups): needed when
    one process drives several ranks."""

    def __enter__(self):
        _reads_params('baton.group')
        _check('baton_group_start', load().baton_group_start())
        return self

    def __exit__(self, *exc):
        _check('baton_group_end', load().baton_group_end())
        return False


def _dtype(t, name):
    d = _DTYPES.get(str(t.dtype))
    if d is None:
        raise TypeError(f'baton: {name} is {t.dtype}; fused calls take float32, float16 or bfloat16')
    return d


def gemv_allreduce(W, x, y=None, comm=None, stream=None):
    """y = sum over ranks of W_r @ x_r on every rank: W [M, K] (row-major, rows contiguous), x [K], y [M], one
    type, on the communicator's GPU.  y is made (as W.new_empty) when not given.  Returns y; asynchronous on
    `stream` (a CUDA stream handle, torch.cuda.Stream, or the current stream of W's device)."""
    if comm is None:
        raise ValueError('baton: gemv_allreduce needs comm= (a baton.Comm)')
    if len(W.shape) != 2 or len(x.shape) != 1:
        raise ValueError(f'baton: W must be 2-D and x 1-D (got {tuple(W.shape)} and {tuple(x.shape)})')
    M, K = W.shape
    if x.shape[0] != K:
        raise ValueError(f'baton: W has {K} columns but x has {x.shape[0]} elements')
    if W.stride(1) != 1 or W.stride(0) != K or x.stride(0) != 1:
        raise ValueError('baton: W and x must be contiguous (W.contiguous(), x.contiguous())')
    if not (W.is_cuda and x.is_cuda):
        raise ValueError('baton: W and x must be CUDA tensors')
    dt = _dtype(W, 'W')
    if _dtype(x, 'x') != dt:
        raise TypeError(f'baton: W is {W.dtype} and x {x.dtype}: one type')
    if y is None:
        y = W.new_empty((M,))
    if tuple(y.shape) != (M,) or y.stride(0) != 1 or _dtype(y, 'y') != dt or not y.is_cuda:
        raise ValueError(f'baton: y must be a contiguous {W.dtype} CUDA vector of {M} elements')
    if stream is None:
        import torch
        stream = torch.cuda.current_stream(W.device).cuda_stream
    elif hasattr(stream, 'cuda_stream'):
        stream = stream.cuda_stream
    _check('baton_gemv_allreduce', load().baton_gemv_allreduce(comm._h, W.data_ptr(), x.data_ptr(), y.data_ptr(),
                                                               M, K, dt, _ctypes.c_void_p(stream)))
    return y


def _stream_of(stream, t):
    if stream is None:
        import torch
        return torch.cuda.current_stream(t.device).cuda_stream
    return stream.cuda_stream if hasattr(stream, 'cuda_stream') else stream


def embedding_alltoall(table, indices, offsets, batch, tables, weights=None, mode='sum', out=None, comm=None,
                       stream=None):
    """Pools this rank's `tables` embedding tables (stacked in `table` [rows, D], rows contiguous) for the whole
    global batch and sends each rank its samples' vectors: bag s*tables + t (table t of sample s) is
    indices[offsets[b]:offsets[b+1]] (int64 CUDA tensors, offsets batch*tables + 1 long; table t's rows already
    offset into `table`), pooled by 'sum' or 'mean', each row times weights[k] when given (sum only).  Returns
    out [batch/n, n*tables*D]: for each of this rank's samples every rank's tables*D values in rank order.  out is
    made (as table.new_empty) when not given; asynchronous on `stream` (or the current stream of table's device)."""
    if comm is None:
        raise ValueError('baton: embedding_alltoall needs comm= (a baton.Comm)')
    if mode not in ('sum', 'mean'):
        raise ValueError(f"baton: mode is 'sum' or 'mean', not {mode!r}")
    if weights is not None and mode != 'sum':
        raise ValueError("baton: weights are for mode='sum'")
    if len(table.shape) != 2 or table.stride(1) != 1 or not table.is_cuda:
        raise ValueError(f'baton: table must be a 2-D CUDA tensor with contiguous rows (got {tuple(table.shape)})')
    rows, D = table.shape
    for name, t in (('indices', indices), ('offsets', offsets)):
        if str(t.dtype) != 'torch.int64' or len(t.shape) != 1 or t.stride(0) != 1 or not t.is_cuda:
            raise ValueError(f'baton: {name} must be a contiguous 1-D int64 CUDA tensor')
    if offsets.shape[0] != batch * tables + 1:
        raise ValueError(f'baton: offsets has {offsets.shape[0]} entries; batch*tables + 1 = {batch * tables + 1}')
    dt = _dtype(table, 'table')
    if weights is not None and (_dtype(weights, 'weights') != dt or tuple(weights.shape) != tuple(indices.shape)
                                or weights.stride(0) != 1 or not weights.is_cuda):
        raise ValueError('baton: weights must be a contiguous CUDA vector, one per index, of the table\'s type')
    n = _ctypes.c_int()
    _check('baton_comm_count', load().baton_comm_count(comm._h, _ctypes.byref(n)))
    if batch % n.value:
        raise ValueError(f'baton: batch {batch} is not a multiple of the {n.value} ranks')
    shape = (batch // n.value, n.value * tables * D)
    if out is None:
        out = table.new_empty(shape)
    if tuple(out.shape) != shape or not out.is_contiguous() or _dtype(out, 'out') != dt or not out.is_cuda:
        raise ValueError(f'baton: out must be a contiguous {table.dtype} CUDA tensor of shape {shape}')
    _check('baton_embedding_alltoall', load().baton_embedding_alltoall(
        comm._h, table.data_ptr(), rows, D, table.stride(0), indices.data_ptr(), indices.shape[0],
        offsets.data_ptr(), weights.data_ptr() if weights is not None else None, batch, tables,
        0 if mode == 'sum' else 4, out.data_ptr(), dt, _ctypes.c_void_p(_stream_of(stream, table))))
    return out


def gemm_alltoall(X, W, out=None, comm=None, stream=None, counts=None):
    """The mixture-of-experts combine, one expert per rank: X [tokens, F] holds the tokens routed to this rank's
    expert, in n blocks of tokens/n rows, block q from rank q, W [F, H] the expert's weight (bfloat16, rows
    contiguous).  Computes X @ W on tensor cores and sends each rank its tokens' rows as they are computed.
    Returns out [tokens, H]: rows q*tokens/n .. of it are this rank's tokens' outputs from expert q.  out is made
    (as X.new_empty) when not given; asynchronous on `stream` (or the current stream of X's device).
    counts (uneven combines): None, or an int32 CUDA tensor of n entries on X's device, read when the call runs:
    block q holds counts[q] tokens, the rest of it is padding, which is not computed (those rows of out, on the
    receiving rank, are unspecified)."""
    if comm is None:
        raise ValueError('baton: gemm_alltoall needs comm= (a baton.Comm)')
    if len(X.shape) != 2 or len(W.shape) != 2 or X.stride(1) != 1 or W.stride(1) != 1:
        raise ValueError(f'baton: X and W must be 2-D with contiguous rows (got {tuple(X.shape)}, {tuple(W.shape)})')
    tokens, F = X.shape
    if W.shape[0] != F:
        raise ValueError(f'baton: X has {F} columns but W has {W.shape[0]} rows')
    H = W.shape[1]
    if str(X.dtype) != 'torch.bfloat16' or str(W.dtype) != 'torch.bfloat16':
        raise TypeError(f'baton: gemm_alltoall takes bfloat16 (X is {X.dtype}, W {W.dtype})')
    if not (X.is_cuda and W.is_cuda):
        raise ValueError('baton: X and W must be CUDA tensors')
    if counts is not None and (len(counts.shape) != 1 or str(counts.dtype) != 'torch.int32' or not counts.is_cuda
                               or counts.stride(0) != 1):
        raise ValueError(f'baton: counts must be a 1-D contiguous int32 CUDA tensor, one entry per rank '
                         f'(got {tuple(counts.shape)}, {counts.dtype})')
    n = _ctypes.c_int()
    _check('baton_comm_count', load().baton_comm_count(comm._h, _ctypes.byref(n)))
    if tokens % n.value:
        raise ValueError(f'baton: tokens {tokens} is not a multiple of the {n.value} ranks')
    if counts is not None and counts.shape[0] != n.value:
        raise ValueError(f'baton: counts has {counts.shape[0]} entries for {n.value} ranks')
    if out is None:
        out = X.new_empty((tokens, H))
    if tuple(out.shape) != (tokens, H) or not out.is_contiguous() or out.dtype != X.dtype or not out.is_cuda:
        raise ValueError(f'baton: out must be a contiguous bfloat16 CUDA tensor of shape {(tokens, H)}')
    _check('baton_gemm_alltoall', load().baton_gemm_alltoall(
        comm._h, X.data_ptr(), X.stride(0), W.data_ptr(), W.stride(0),
        counts.data_ptr() if counts is not None else None, out.data_ptr(), tokens, F, H,
        _DTYPES['torch.bfloat16'], _ctypes.c_void_p(_stream_of(stream, X))))
    return out

"""Comm.init_rank from Python, a process per rank: the parent makes the
unique id and starts N processes (2, or the third argument), each seeing
one GPU (CUDA_VISIBLE_DEVICES); each calls Comm.init_rank(N, id, rank),
reports its communicator's rank count and rank, and destroys it.  TAP; a
skip with fewer than N GPUs.
Usage: python3 python_ranks.py PYTHON_DIR LIBBATON [N]"""
import ctypes
import os
import subprocess
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baton
from tap import ok, skip, done


def child(libpath, n, rank, uid):
    lib = baton.load(libpath)
    comm = baton.Comm.init_rank(n, uid, rank)
    count, me = ctypes.c_int(), ctypes.c_int()
    lib.baton_comm_user_rank.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    lib.baton_comm_count(comm._h, ctypes.byref(count))
    lib.baton_comm_user_rank(comm._h, ctypes.byref(me))
    print(f'count {count.value} rank {me.value}', flush=True)
    comm.destroy()


def gpus():
    """GPUs this machine has, through the CUDA runtime libbaton.so uses; 0 when it cannot tell."""
    for name in ('libcudart.so', '/usr/local/cuda/lib64/libcudart.so'):
        try:
            rt = ctypes.CDLL(name)
        except OSError:
            continue
        n = ctypes.c_int(0)
        return n.value if rt.cudaGetDeviceCount(ctypes.byref(n)) == 0 else 0
    return 0


if len(sys.argv) > 3 and sys.argv[3] == '--child':
    child(sys.argv[2], int(sys.argv[4]), int(sys.argv[5]), bytes.fromhex(sys.argv[6]))
    sys.exit(0)

n = int(sys.argv[3]) if len(sys.argv) > 3 else 2
have = gpus()
if have < n:
    skip('Comm.init_rank, a process per rank', f'needs {n} GPUs, found {have}')
    done()
baton.load(sys.argv[2])
uid = baton.Comm.unique_id()
procs = []
for r in range(n):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r))
    procs.append(subprocess.Popen([sys.executable, __file__, sys.argv[1], sys.argv[2], '--child', str(n), str(r),
                                   uid.hex()], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
for r, p in enumerate(procs):
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    good = p.returncode == 0 and f'count {n} rank {r}' in out
    ok(good, f'rank {r} of {n}: Comm.init_rank in its own process made a communicator of {n} ranks, rank {r}')
    if not good:
        print('# ' + out.strip()[-600:].replace('\n', '\n# '))
done()

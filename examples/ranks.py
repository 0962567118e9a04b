"""What the examples share: the ranks this process drives -- every rank from one
process (--ranks N, ranks on --gpus G GPUs, possibly sharing them), or, under
torchrun, its own rank on its own GPU (a process per GPU: torch.distributed
hands out baton's unique id and computes the references) -- their
communicators and streams, the ranks' calls made together, timing (eager
calls, or replays of a CUDA graph under torchrun) and the end."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
import torch  # noqa: E402
import baton  # noqa: E402


class Ranks:
    """ranks, gpus: the command line's (ignored under torchrun, where WORLD_SIZE and RANK say); lib: libbaton.so
    (None: beside this checkout)."""

    def __init__(self, ranks, gpus, lib):
        baton.load(lib)
        self.dist = None
        if int(os.environ.get('WORLD_SIZE', '0')) > 0:   # torchrun: this process is one rank
            import torch.distributed as dist
            self.dist = dist
            self.n = int(os.environ['WORLD_SIZE'])
            rank, local = int(os.environ['RANK']), int(os.environ.get('LOCAL_RANK', os.environ['RANK']))
            torch.cuda.set_device(local)
            dist.init_process_group('nccl', device_id=torch.device('cuda', local))
            uid = [baton.Comm.unique_id() if rank == 0 else None]
            dist.broadcast_object_list(uid, src=0)
            self.mine, self.dev = [rank], {rank: local}
            self.comm = {rank: baton.Comm.init_rank(self.n, uid[0], rank)}
            self.gpus = self.n
        else:
            self.n, self.gpus = ranks, gpus or ranks
            self.mine = list(range(self.n))
            self.dev = {r: r % self.gpus for r in self.mine}
            self.comm = dict(zip(self.mine, baton.Comm.init_all([self.dev[r] for r in self.mine])))
        # A stream per rank: ranks sharing a GPU wait for each other inside
        # the kernel, so one stream for all of them would never finish.
        self.stream = {r: torch.cuda.Stream(device=self.dev[r]) for r in self.mine}

    @property
    def procs(self):
        """Whether each rank has a process of its own (torchrun)."""
        return self.dist is not None

    def device(self, r):
        return f'cuda:{self.dev[r]}'

    def where(self):
        return (f'{self.n} ranks, a process per GPU' if self.procs else
                f'{self.n} ranks on {self.gpus} GPU(s) from one process')

    def call(self, fn):
        """fn(r, stream) for every rank of this process, made together (a group) when there are several."""
        if len(self.mine) == 1:
            fn(self.mine[0], self.stream[self.mine[0]])
            return
        with baton.group():
            for r in self.mine:
                fn(r, self.stream[r])

    def sync(self):
        for d in set(self.dev.values()):
            torch.cuda.synchronize(d)

    def timed(self, fn, graph, reps=20):
        """Microseconds per call of fn() (which launches on this process's ranks' streams): eager calls, or with
        graph (one rank in this process) replays of a CUDA graph of `reps` calls captured on the rank's stream;
        host time, the launches included.  Under torchrun every rank starts together and the slowest rank's time
        is returned."""
        if graph and len(self.mine) != 1:
            raise ValueError('a CUDA graph here holds one rank\'s calls: run one process per GPU (torchrun)')
        fn()   # once outside any capture: the communicator reserves what the call needs
        self.sync()
        run, n = fn, reps
        if graph:
            s = self.stream[self.mine[0]]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s, capture_error_mode='relaxed'):
                for _ in range(reps):
                    fn()
            run, n = g.replay, 1
        run()
        self.sync()
        if self.procs:
            self.dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            run()
        self.sync()
        return self.most((time.perf_counter() - t0) * 1e6 / reps)

    def most(self, v):
        """v, or under torchrun the largest v of every rank."""
        if not self.procs:
            return v
        t = torch.tensor([float(v)], device=self.device(self.mine[0]), dtype=torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.item()

    def say(self, text):
        """Prints text once (rank 0's process)."""
        if not self.procs or self.mine[0] == 0:
            print(text, flush=True)

    def end(self, ok):
        """Destroys the communicators; the exit status: 0 when ok on every rank."""
        for c in self.comm.values():
            c.destroy()
        bad = self.most(0.0 if ok else 1.0)
        if self.procs:
            self.dist.destroy_process_group()
        return 0 if bad == 0 else 1

-- Direct AllToAll, out of place: every rank sends block q of its input
-- straight to rank q (its own block is a local copy).
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple), threads (0: BATON_NTHREADS),
-- placement ("split": a thread block per peer and direction; "paired": a
-- peer's send and receive share one, half as many), via ("fifo"; "direct",
-- "put" or "get": direct steps instead of FIFO messages, docs/DSL.md,
-- "Direct lowering": Simple puts or gets the blocks straight into the
-- outputs, LL puts them into the receiver's scratch, whence it copies them).
local n = param("ranks", 8)
local k = param("chunks", 1)
local via = param("via", "fifo")
collective{ kind = "alltoall", name = "alltoall_direct" .. (via ~= "fifo" and "_" .. via or ""), ranks = n, chunks = k,
            inplace = false, protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0), placement = param("placement", "split"), via = via }
for r = 0, n - 1 do
  for q = 0, n - 1 do
    chunk(r, "input", q * k, k):copy(q, "output", r * k)
  end
end

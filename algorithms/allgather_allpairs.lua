-- All-pairs AllGather, in place: every rank sends its block straight to
-- every other rank (one step of latency; for small messages).
-- inplace=0 builds the out-of-place program (the input goes straight to
-- every rank's output, the own block by a local copy).
-- via="direct" (or "put", "get") lowers the copies to direct steps instead
-- of FIFO messages (docs/DSL.md, "Direct lowering"): Simple puts straight
-- into the peers' outputs, LL into their scratch, whence they copy it.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (LL),
-- instances (1), inplace (1), threads (0: BATON_NTHREADS), via (fifo),
-- placement ("split": a thread block per peer and direction; "paired": one
-- per peer, for rank counts where the split ones do not fit).
local allpairs = require "baton.allpairs"
local topo = require "baton.topo"
local n = param("ranks", 8)
local k = param("chunks", 1)
local inplace = param("inplace", 1) ~= 0
local via = param("via", "fifo")
collective{ kind = "allgather", name = "allgather_allpairs" .. (inplace and "" or "_oop") .. (via ~= "fifo" and "_" .. via or ""),
            ranks = n, chunks = k, inplace = inplace, protocol = param("protocol", "LL"),
            instances = param("instances", 1), threads = param("threads", 0), via = via,
            placement = param("placement", "split") }
if inplace then
  allpairs.all_gather(topo.range(n), "output", 0, { count = k })  -- rank r's block is output[r*k ..]
else
  for r = 0, n - 1 do
    for q = 0, n - 1 do chunk(r, "input", 0, k):copy(q, "output", r * k) end
  end
end

-- Direct Scatter from rank 0, out of place: the root sends block r of its
-- input straight to rank r and copies its own; n - 1 messages leave the
-- root at once, one per peer.  Off the root nothing but the output is used.
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root)
-- and rotates the root's input for it.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "scatter", name = "scatter_direct", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for r = 0, n - 1 do chunk(0, "input", r * k, k):copy(r, "output", 0) end

-- Direct Gather to rank 0, out of place: every rank sends its block
-- straight to the root, which copies its own; n - 1 messages arrive at the
-- root at once, one per peer.  Off the root nothing but the input is used.
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root)
-- and rotates the root's output into place.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "gather", name = "gather_direct", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for r = 0, n - 1 do chunk(r, "input", 0, k):copy(0, "output", r * k) end

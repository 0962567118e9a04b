-- Pairwise-exchange AllToAll, out of place: in round d (1..n-1) rank r
-- trades blocks with rank r xor d (n a power of two: one peer sends and
-- receives), else sends to rank r+d and receives from rank r-d, so that
-- a rank talks to `peers` ranks at a time instead of all n-1 (round(),
-- docs/DSL.md "Tracing order and rounds"); its own block is a local copy.
-- What it buys: fewer connections busy at once (the exchange NCCL's and
-- MPI's users pick at many ranks); what it costs: the rounds wait for one
-- another.
-- Parameters: ranks (8), chunks (1: pieces per block), peers (1: peers per
-- round; more than n-1: all at once), protocol (Simple), threads (0:
-- BATON_NTHREADS), placement ("paired": a peer's send and receive share
-- one thread block; "split").
local n = param("ranks", 8)
local k = param("chunks", 1)
local peers = param("peers", 1)
if peers < 1 then error("peers must be 1 or more") end
peers = math.min(peers, math.max(n - 1, 1))   -- more than n - 1: every peer at once
collective{ kind = "alltoall", name = peers == 1 and "alltoall_pairwise" or "alltoall_pairwise_" .. peers, ranks = n,
            chunks = k, inplace = false, protocol = param("protocol", "Simple"), threads = param("threads", 0),
            placement = param("placement", "paired") }
for r = 0, n - 1 do chunk(r, "input", r * k, k):copy(r, "output", r * k) end
for d = 1, n - 1 do
  if d > 1 and (d - 1) % peers == 0 then round() end
  for r = 0, n - 1 do
    local q = n & (n - 1) == 0 and r ~ d or (r + d) % n
    chunk(r, "input", q * k, k):copy(q, "output", r * k)
  end
end

-- Recursive-doubling AllReduce, in place, for any number of ranks: every
-- rank exchanges its whole buffer with rank r xor d for d = 1, 2, 4, ...,
-- both keeping the sum (exchange()), so after log2(p) rounds every rank of
-- the first p (the highest power of two not above n) holds the total.
-- log2(p) hops of the whole buffer: for latency-bound sizes.  The other
-- n - p ranks first add their buffer into rank q = r - p's and get the
-- result back from it at the end (two more hops).
-- Parameters: ranks (8), chunks (1: pieces, each exchanged in its own
-- message), protocol (Simple), instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "allreduce", name = "allreduce_rd", ranks = n, chunks = k, inplace = true,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
local p = 1
while p * 2 <= n do p = p * 2 end
for c = 0, k - 1 do
  for q = 0, n - p - 1 do chunk(q, "input", c):reduce(chunk(p + q, "input", c)) end
  local d = 1
  while d < p do
    for r = 0, p - 1 do
      if r < r ~ d then exchange(chunk(r, "input", c), chunk(r ~ d, "input", c)) end
    end
    d = d * 2
  end
  for q = 0, n - p - 1 do chunk(q, "input", c):copy(p + q, "input", c) end
end

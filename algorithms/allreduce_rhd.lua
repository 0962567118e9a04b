-- Recursive halving-doubling AllReduce (Rabenseifner), in place, for a
-- power-of-two number of ranks: log2(n) steps of pairwise exchanges.
--   Reduce-scatter by recursive halving: at distance d = n/2, n/4, ..., 1,
--   rank r and its partner r xor d split the range of chunks they are
--   responsible for; each reduces the partner's copy of its half into its
--   own, so that rank r ends with chunk r fully reduced.
--   All-gather by recursive doubling: at distance d = 1, 2, ..., n/2 each
--   rank sends the range it holds to its partner, doubling it.
-- Parameters: ranks (8), protocol (Simple), instances (1).
local topo = require "baton.topo"
local n = param("ranks", 8)
if not topo.is_pow2(n) then
  error("recursive halving-doubling needs a power-of-two number of ranks, not " .. n)
end
collective{ kind = "allreduce", name = "allreduce_rhd", ranks = n, chunks = n, inplace = true,
            protocol = param("protocol", "Simple"), instances = param("instances", 1) }
local lo, len = {}, n          -- rank r is responsible for chunks lo[r] .. lo[r]+len-1
for r = 0, n - 1 do lo[r] = 0 end
local d = n // 2
while d >= 1 do
  len = len // 2
  for r = 0, n - 1 do          -- keep the half whose chunks have r's bit d
    if r & d ~= 0 then lo[r] = lo[r] + len end
  end
  for r = 0, n - 1 do
    local p = r ~ d
    chunk(r, "input", lo[r], len):reduce(chunk(p, "input", lo[r], len))
  end
  d = d // 2
end
d = 1
while d < n do
  for r = 0, n - 1 do
    chunk(r, "input", lo[r], len):copy(r ~ d, "input", lo[r])
  end
  for r = 0, n - 1 do          -- the pair now shares the union of their ranges
    if r & d ~= 0 then lo[r] = lo[r] - len end
  end
  len = len * 2
  d = d * 2
end

-- Recursive-doubling AllGather, in place (rank r's block is output[r*k ..]),
-- for any number of ranks: log2(p) rounds among the first p ranks, p the
-- highest power of two not above n.  In round i (d = 2^i) rank r sends its
-- partner r xor d everything it has, the blocks of its group of d ranks
-- (r with its low i bits cleared, onwards), in one message, and so doubles
-- what it has.  The other n - p ranks ride along: rank p+q first sends
-- its block to rank q, which carries it in its group (a second message per
-- round); instead of one copy of everything back at the end, rank q sends
-- rank p+q its own block at once and forwards it what it receives in every
-- round, so that rank p+q has every block one hop after rank q.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "allgather", name = "allgather_rd", ranks = n, chunks = k, inplace = true,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
local p = 1
while p * 2 <= n do p = p * 2 end
local e = n - p   -- ranks p .. n-1 pair with ranks 0 .. e-1

-- Blocks [first, last) from rank `from` to the same place of rank `to`.
local function send(from, to, first, last)
  if last > first then chunk(from, "output", first * k, (last - first) * k):copy(to, "output", first * k) end
end

-- Group g's blocks (ranks g .. g+d-1) and those of their extra ranks, from rank `from` to rank `to`.
local function send_group(from, to, g, d)
  send(from, to, g, g + d)
  send(from, to, p + g, p + math.min(g + d, e))
end

for q = 0, e - 1 do
  send(p + q, q, p + q, p + q + 1)
  send(q, p + q, q, q + 1)
end
local d = 1
while d < p do
  for r = 0, p - 1 do send_group(r, r ~ d, r & ~(d - 1), d) end
  for q = 0, e - 1 do send_group(q, p + q, (q ~ d) & ~(d - 1), d) end   -- what q just received
  d = d * 2
end

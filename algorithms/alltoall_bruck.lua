-- Bruck AllToAll, out of place: ceil(log2(ranks)) rounds of one message
-- per rank, for many ranks and small blocks (latency-bound sizes).
-- Rank r's block for rank r + j (mod n) is "at distance j".  In round i
-- (b = 2^i) every rank packs the blocks it holds at a distance with bit i
-- set into scratch (local copies) and sends them in one message to rank
-- r + b, which keeps them at the same distance: after the last round the
-- block at distance j of rank r is the one rank r - j sent to r, and a
-- local copy puts it in its place in the output.  Each rank sends
-- ceil(log2 n) messages of about n/2 blocks instead of n - 1 of one.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "alltoall", name = "alltoall_bruck", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
-- held[r][j]: where rank r keeps the block at distance j (1 <= j < n).
local held = {}
for r = 0, n - 1 do
  held[r] = {}
  for j = 1, n - 1 do held[r][j] = chunk(r, "input", ((r + j) % n) * k, k) end
  chunk(r, "input", r * k, k):copy(r, "output", r * k)   -- distance 0: its own block
end
local area = 0   -- each round packs and receives in scratch areas of its own
local b = 1
while b < n do
  local dist = {}   -- the distances this round moves, in order
  for j = 1, n - 1 do
    if j & b ~= 0 then dist[#dist + 1] = j end
  end
  local m = #dist
  for r = 0, n - 1 do   -- pack: every rank before any rank's holdings change
    for x, j in ipairs(dist) do held[r][j]:copy(r, "pack", area + (x - 1) * k) end
  end
  for r = 0, n - 1 do
    chunk(r, "pack", area, m * k):copy((r + b) % n, "recv", area)
  end
  for q = 0, n - 1 do
    for x, j in ipairs(dist) do held[q][j] = chunk(q, "recv", area + (x - 1) * k, k) end
  end
  area = area + m * k
  b = b * 2
end
for r = 0, n - 1 do
  for j = 1, n - 1 do held[r][j]:copy(r, "output", ((r - j) % n) * k) end
end

-- Bruck AllToAll, out of place: ceil(log2(ranks)) rounds of one message
-- per rank, for many ranks and small blocks (latency-bound sizes).
-- Rank r's block for rank r + j (mod n) is "at distance j"; each rank keeps
-- its blocks in a work buffer indexed by distance (block j at chunks
-- j*k ..), filled by rotating its input (two consecutive ranges).  In
-- round i (b = 2^i) every rank sends the blocks at the distances with bit
-- i set, runs of b blocks 2b apart, in one strided message straight into
-- rank r + b's work buffer at the same distances.  After the last round
-- the block at distance j of rank r is the one rank r - j sent to r:
-- output block r - j, so the output is the work buffer backwards, two
-- reversed ranges of whole blocks.  Each rank sends ceil(log2 n) messages
-- of about n/2 blocks instead of n - 1 of one, and packs nothing.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "alltoall", name = "alltoall_bruck", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for r = 0, n - 1 do   -- work[j] = input block r + j: distances 0 .. n-r-1, then the rest
  chunk(r, "input", r * k, (n - r) * k):copy(r, "work", 0)
  if r > 0 then chunk(r, "input", 0, r * k):copy(r, "work", (n - r) * k) end
end
local b = 1
while b < n do
  local m = 0   -- distances with bit b set
  for j = 1, n - 1 do
    if j & b ~= 0 then m = m + 1 end
  end
  local moved = {run = b * k, stride = 2 * b * k}
  local function blocks(r) return chunk(r, "work", b * k, m * k, moved) end
  -- The ranks r -> r + b form cycles.  Operations are traced one at a
  -- time, so in each cycle one rank sets its blocks aside first and the
  -- others are traced backwards along it: every rank sends before a message
  -- overwrites its blocks (on the GPU a rank's receive waits only for its
  -- own send).
  local done = {}
  for c = 0, n - 1 do
    if not done[c] then
      local cycle, r = {}, c
      repeat
        cycle[#cycle + 1] = r
        done[r] = true
        r = (r + b) % n
      until r == c
      local aside = blocks(c):copy(c, "aside", 0)
      for x = #cycle, 2, -1 do blocks(cycle[x]):copy((cycle[x] + b) % n, "work", b * k, moved) end
      aside:copy(cycle[2], "work", b * k, moved)
    end
  end
  b = b * 2
end
local back = {run = k, stride = -k}   -- whole blocks, last first
for r = 0, n - 1 do   -- output block r - j = work block j
  chunk(r, "work", r * k, (r + 1) * k, back):copy(r, "output", 0)
  if r < n - 1 then chunk(r, "work", (n - 1) * k, (n - 1 - r) * k, back):copy(r, "output", (r + 1) * k) end
end

-- Direct Broadcast from rank 0, in one or two hops.
-- shot=1: the root sends its buffer straight to every other rank, n - 1
-- messages leaving it at once: one hop of latency, the root's link
-- carrying the data n - 1 times (small messages).
-- shot=2: the buffer goes in n - 1 pieces, piece p from the root to rank p
-- only, which passes it on to every rank but the root: two hops, the
-- root's link carrying the data once and every other rank's (n - 2) /
-- (n - 1) times (large messages; the chain has n - 1 hops).  Each piece
-- goes in `chunks` parts, so that the second hop of one overlaps the
-- first of the next.
-- With via="direct" the ranks store into the peers' outputs (docs/DSL.md,
-- "Direct lowering").  land=1 (direct, shot 1): the root stores into every
-- peer's scratch instead, and each peer copies it into its output: no rank
-- reaches another's buffers, so it runs where only the windows are
-- reachable (eager calls with a process per GPU), up to what the scratch
-- holds.
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), shot (1), chunks (1: parts of each piece),
-- inplace (false: NCCL's in-place call, one buffer, as PyTorch makes it),
-- protocol (Simple), instances (1), threads (0: BATON_NTHREADS), via (fifo:
-- "direct", "put" or "get" lower the copies to direct steps).
local n = param("ranks", 8)
local shot = param("shot", 1)
local k = param("chunks", 1)
local inplace = param("inplace", false)
local via = param("via", "fifo")
local land = param("land", 0) ~= 0
if shot ~= 1 and shot ~= 2 then error("shot must be 1 or 2, not " .. tostring(shot)) end
if land and (shot ~= 1 or via == "fifo") then error("land=1 is for the direct one-hop Broadcast (shot=1, via=direct or put)") end
local pieces = (shot == 2 and n > 2) and n - 1 or 1
collective{ kind = "broadcast", name = "broadcast_direct" .. (pieces > 1 and "2" or "") .. (land and "_land" or "") ..
                                       (via ~= "fifo" and "_" .. via or ""),
            ranks = n, chunks = k * pieces, inplace = inplace, protocol = param("protocol", "Simple"),
            instances = param("instances", 1), threads = param("threads", 0), via = via }
for j = 0, k - 1 do
  for p = 1, pieces do
    local at = (p - 1) * k + j
    local part = chunk(0, "input", at)
    if not inplace then part:copy(0, "output", at) end   -- in place it is there already
    if pieces == 1 then
      for r = 1, n - 1 do part:copy(r, land and "land" or "output", at) end
    else
      local mine = part:copy(p, "output", at)
      for r = 1, n - 1 do
        if r ~= p then mine:copy(r, "output", at) end
      end
    end
  end
end
if land then
  for r = 1, n - 1 do
    for at = 0, k - 1 do chunk(r, "land", at):copy(r, "output", at) end
  end
end

-- Chain Broadcast from rank 0: rank 0 sends its input down
-- the chain 0 -> 1 -> ... -> n-1 and copies it into its own output; every
-- other rank receives into its output and forwards from there in the same
-- step.  The buffer goes in `chunks` pieces, one after another, so that
-- every link of the chain carries a piece at once: n - 2 + chunks steps of
-- one piece each, every link used once per piece (large messages).
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), chunks (4: pieces, the pipeline depth), inplace
-- (false: NCCL's in-place call, one buffer, as PyTorch makes it), protocol
-- (Simple), instances (1), threads (0: BATON_NTHREADS), via (fifo: "direct",
-- "put" or "get" lower the copies to direct steps, docs/DSL.md).
local n = param("ranks", 8)
local k = param("chunks", 4)
local inplace = param("inplace", false)
local via = param("via", "fifo")
collective{ kind = "broadcast", name = "broadcast_chain" .. (via ~= "fifo" and "_" .. via or ""), ranks = n, chunks = k, inplace = inplace,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0), via = via }
for c = 0, k - 1 do
  local piece = chunk(0, "input", c)
  if not inplace then piece:copy(0, "output", c) end   -- in place it is there already
  for r = 1, n - 1 do piece = piece:copy(r, "output", c) end
end

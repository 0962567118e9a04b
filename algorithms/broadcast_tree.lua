-- Binomial-tree Broadcast from rank 0: rank r's parent is r
-- with its lowest set bit cleared, so rank 0 sends to 1, 2, 4, ..., rank
-- 4 to 5 and 6, and every rank has the data after ceil(log2 n) hops.  A
-- rank receives into its output and sends from there to its children,
-- the one with the largest subtree first (the first send in the receiving
-- step).  The buffer goes in `chunks` pieces, pipelined down the tree.
-- Fewer hops than the chain (small and medium messages, many ranks); the
-- root sends every piece log2(n) times.
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), chunks (4: pieces, the pipeline depth), inplace
-- (false: NCCL's in-place call, one buffer, as PyTorch makes it), protocol
-- (Simple), instances (1), threads (0: BATON_NTHREADS), via (fifo: "direct",
-- "put" or "get" lower the copies to direct steps, docs/DSL.md).
local n = param("ranks", 8)
local k = param("chunks", 4)
local inplace = param("inplace", false)
local via = param("via", "fifo")
collective{ kind = "broadcast", name = "broadcast_tree" .. (via ~= "fifo" and "_" .. via or ""), ranks = n, chunks = k, inplace = inplace,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0), via = via }

local topo = require "baton.topo"
local function children(r) return topo.binomial_children(r, n) end

-- piece (at rank r) copied to every rank of r's subtree, the largest subtrees first.
local function down(piece, r)
  local kids = children(r)
  for x = #kids, 1, -1 do down(piece:copy(kids[x], "output", piece.index), kids[x]) end
end

for c = 0, k - 1 do
  local piece = chunk(0, "input", c)
  if not inplace then piece:copy(0, "output", c) end   -- in place it is there already
  down(piece, 0)
end

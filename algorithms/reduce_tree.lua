-- Binomial-tree Reduce into rank 0: rank r's parent is r with
-- its lowest set bit cleared (rank 0 receives from 1, 2, 4, ...), so the
-- sum is complete after ceil(log2 n) hops.  A rank with children adds its
-- input and their partial sums, the smallest subtree first, into scratch
-- (rank 0: into its output), the last addition and the send to its parent
-- one step; a leaf sends its input.  Only rank 0 writes its output.  The
-- buffer goes in `chunks` pieces, pipelined up the tree.  Fewer hops than
-- the chain (small and medium messages, many ranks); rank 0 receives every
-- piece log2(n) times.
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), chunks (4: pieces, the pipeline depth), inplace
-- (false: NCCL's in-place call, one buffer, as PyTorch makes it), protocol
-- (Simple), instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 4)
local inplace = param("inplace", false)
collective{ kind = "reduce", name = "reduce_tree", ranks = n, chunks = k, inplace = inplace,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }

local topo = require "baton.topo"
local function children(r) return topo.binomial_children(r, n) end

-- The sum of input[c] over r's subtree, at rank r (a leaf: its input).
local function subtree_sum(r, c)
  local kids = children(r)
  local sum = chunk(r, "input", c)
  if r == 0 then
    if not inplace then sum = sum:copy(0, "output", c) end   -- in place the root sums in its one buffer
  elseif #kids > 0 then
    sum = sum:copy(r, "scratch", c)
  end
  for _, q in ipairs(kids) do sum = sum:reduce(subtree_sum(q, c)) end
  return sum
end

for c = 0, k - 1 do subtree_sum(0, c) end

-- Chain Reduce into rank 0: the chain n-1 -> n-2 -> ... -> 0.
-- Rank n-1 sends its input; every rank between receives the partial sum,
-- adds its own input into scratch and sends the sum on in one step; rank 0
-- adds its own into its output.  Only rank 0 writes its output.  The
-- buffer goes in `chunks` pieces, one after another, so that every link
-- carries a piece at once: n - 2 + chunks steps (large messages).
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), chunks (4: pieces, the pipeline depth), inplace
-- (false: NCCL's in-place call, one buffer, as PyTorch makes it), protocol
-- (Simple), instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 4)
local inplace = param("inplace", false)
collective{ kind = "reduce", name = "reduce_chain", ranks = n, chunks = k, inplace = inplace,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for c = 0, k - 1 do
  local sum = chunk(n - 1, "input", c)
  for r = n - 2, 0, -1 do
    local own = chunk(r, "input", c)
    if r == 0 and inplace then sum = own:reduce(sum)   -- the root's one buffer takes the sum
    else sum = own:copy(r, r == 0 and "output" or "scratch", c):reduce(sum) end
  end
  if n == 1 and not inplace then sum:copy(0, "output", c) end   -- one rank: its input is the sum
end

-- Chain Reduce into rank 0, out of place: the chain n-1 -> n-2 -> ... -> 0.
-- Rank n-1 sends its input; every rank between receives the partial sum,
-- adds its own input into scratch and sends the sum on in one step; rank 0
-- adds its own into its output.  Only rank 0 writes its output.  The
-- buffer goes in `chunks` pieces, one after another, so that every link
-- carries a piece at once: n - 2 + chunks steps (large messages).
-- Other roots: the runtime relabels the ranks (rank p runs rank p - root).
-- Parameters: ranks (8), chunks (4: pieces, the pipeline depth), protocol
-- (Simple), instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 4)
collective{ kind = "reduce", name = "reduce_chain", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for c = 0, k - 1 do
  local sum = chunk(n - 1, "input", c)
  for r = n - 2, 0, -1 do
    sum = chunk(r, "input", c):copy(r, r == 0 and "output" or "scratch", c):reduce(sum)
  end
  if n == 1 then sum:copy(0, "output", c) end   -- one rank: its input is the sum
end

-- All-pairs ReduceScatter, out of place: every rank sends block q of its
-- input straight to rank q's scratch; rank q adds the n-1 blocks it got to
-- its own and writes the sum to its output (one step of latency; for small
-- and medium messages).
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (LL),
-- instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "reducescatter", name = "reducescatter_allpairs", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "LL"), instances = param("instances", 1),
            threads = param("threads", 0) }
for r = 0, n - 1 do
  for q = 0, n - 1 do
    if q ~= r then chunk(r, "input", q * k, k):copy(q, "scratch", r * k) end
  end
end
for q = 0, n - 1 do
  local acc = chunk(q, "input", q * k, k):copy(q, "output", 0)
  for r = 0, n - 1 do
    if r ~= q then acc = acc:reduce(chunk(q, "scratch", r * k, k)) end
  end
end

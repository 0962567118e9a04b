-- All-pairs ReduceScatter, out of place: every rank sends block q of its
-- input straight to rank q, which adds the n-1 blocks it gets to its own and
-- writes the sum to its output (one step of latency; for small and medium
-- messages).  chain=0: the blocks land in scratch, then local reductions
-- add them up; chain=1: each block is reduced into the output as it is
-- received (no scratch, no local pass; the receives run one after another).
-- via="direct" (or "put", "get") lowers the copies and reductions between
-- ranks to direct steps instead of FIFO messages (docs/DSL.md, "Direct
-- lowering"): chain=1 with protocol=Simple reduces with getr from the
-- peers' inputs; chain=0 puts the blocks into the owner's scratch.
-- inplace=1 builds the in-place program (NCCL's layout: rank q's output is
-- block q of its input): the sum is reduced into that block, which no
-- peer reads, with no copy.
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (LL),
-- instances (1), threads (0: BATON_NTHREADS), chain (0), via (fifo),
-- inplace (0), placement ("split"; "paired": a thread block per peer).
local n = param("ranks", 8)
local k = param("chunks", 1)
local chain = param("chain", 0) ~= 0
local via = param("via", "fifo")
local inplace = param("inplace", 0) ~= 0
collective{ kind = "reducescatter", name = "reducescatter_allpairs" .. (chain and "_chain" or "") .. (inplace and "_ip" or "") ..
            (via ~= "fifo" and "_" .. via or ""),
            ranks = n, chunks = k, inplace = inplace, protocol = param("protocol", "LL"),
            instances = param("instances", 1), threads = param("threads", 0), via = via,
            placement = param("placement", "split") }
-- rank q's own block, where its sum goes
local function own(q)
  if inplace then return chunk(q, "input", q * k, k) end
  return chunk(q, "input", q * k, k):copy(q, "output", 0)
end
if chain then
  for q = 0, n - 1 do
    local acc = own(q)
    for m = 1, n - 1 do acc = acc:reduce(chunk((q + m) % n, "input", q * k, k)) end
  end
  return
end
for r = 0, n - 1 do
  for q = 0, n - 1 do
    if q ~= r then chunk(r, "input", q * k, k):copy(q, "scratch", r * k) end
  end
end
for q = 0, n - 1 do
  local acc = own(q)
  for r = 0, n - 1 do
    if r ~= q then acc = acc:reduce(chunk(q, "scratch", r * k, k)) end
  end
end

-- Fused embedding-bag + AllToAll for model-parallel embedding tables (the
-- recommendation models' sparse layer): each rank holds T tables of
-- dimension D (stacked into one matrix E [R, D]) and pools them for the
-- whole global batch of B samples; the pooled vectors of the samples rank
-- q owns (samples q*B/n .. (q+1)*B/n - 1) go to rank q.  Each rank ends
-- with out [B/n, n*T*D]: for each of its samples, the T*D pooled values
-- of every rank's tables in rank order -- the layout the interaction layer
-- takes, written by the receive itself (interleave), with no shuffle after.
-- Bags are sample-major: bag b*T + t is table t of sample b; I holds the
-- rows of E that the bags name (table t's rows already offset into E), O
-- the bags' offsets into I (B*T + 1 of them), w (weighted=1) a weight
-- per index.  Each rank computes the remote slices first (tileorder "comm")
-- in its compute blocks; every tile is sent as soon as it is pooled.
-- Parameters: ranks (4), chunks (1: slices per destination rank; the
-- batch per rank must be a multiple), mode ("sum" or "mean"), weighted (0),
-- protocol (Simple), sync ("group:8": a send waits for 8 tiles at a time,
-- so that a chunk may be cut into 8 times more tiles than semaphores --
-- tiles never cross an output row), tileorder ("comm"), threads (0),
-- minbytes / maxbytes (sizes of one rank's output slice from each rank,
-- B/n*T*D elements, that the runtime picks it for), placement ("split";
-- "paired": a thread block per peer), order ("rank": every rank pools
-- rank 0's samples first, then rank 1's, ...; "rotated": rank r pools rank
-- r+1's first, ..., its own last, so that the ranks' slices for one
-- destination are not all ready at once).
local n = param("ranks", 4)
local k = param("chunks", 1)
local mode = param("mode", "sum")
local weighted = param("weighted", 0) ~= 0
if mode ~= "sum" and mode ~= "mean" then error("mode must be sum or mean, not " .. tostring(mode)) end
if weighted and mode ~= "sum" then error("weighted=1 is for mode=sum (as in PyTorch)") end
collective{ kind = "alltoall", ranks = n, chunks = k, inplace = false, interleave = "T*D",
            name = "embedding_alltoall_" .. mode .. (weighted and "_w" or "") .. (k > 1 and "_c" .. k or ""),
            protocol = param("protocol", "Simple"), threads = param("threads", 0),
            tileorder = param("tileorder", "comm"), placement = param("placement", "split"),
            minbytes = param("minbytes", 0), maxbytes = param("maxbytes", 0) }
local E = matrix("E", "R", "D")
local I = index("I", "L")
local O = index("O", "NO")
local w = weighted and vector("w", "L") or nil
local sync = param("sync", "group:8")
local order = param("order", "rank")
if order ~= "rank" and order ~= "rotated" then error("order must be rank or rotated, not " .. tostring(order)) end
if n == 1 then   -- one rank: the pooling alone, stored straight into the output
  embedding_bag(E, I, O, 0, 0, k, { mode = mode, weights = w, sync = sync, into = "output" })
  return
end
for r = 0, n - 1 do
  for i = 0, n - 1 do   -- rank q's samples: input chunks q*k .. q*k+k-1
    local q = order == "rotated" and (r + 1 + i) % n or i
    embedding_bag(E, I, O, r, q * k, k, { mode = mode, weights = w, sync = sync })
  end
end
for r = 0, n - 1 do
  for q = 0, n - 1 do
    chunk(r, "input", q * k, k):copy(q, "output", r * k)
  end
end

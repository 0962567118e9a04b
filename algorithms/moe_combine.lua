-- Fused GEMM + AllToAll, the mixture-of-experts combine (expert
-- parallelism, one expert per rank): rank r holds the tokens routed to its
-- expert, X_r [T, F] grouped by the rank that owns them (T/n rows from
-- each rank: a capacity per source rank, as capacity-factor routing pads
-- them), and the expert's weight W_r [F, H].  It computes Y_r = X_r W_r
-- (bf16, f32 accumulation) tile by tile, and the rows of rank q's tokens
-- go back to rank q as soon as they are computed, the other ranks' first.
-- Each rank ends with out [n][T/n][H]: block r holds its tokens' outputs
-- from expert r.
-- On GPUs the steps run as one GEMM on tensor cores (docs/FUSED.md).
-- Parameters: ranks (4), chunks (1: slices per source rank), protocol
-- (Simple), sync ("tile"), tileorder ("comm"), threads (0), minbytes /
-- maxbytes, placement ("split"; "paired": a thread block per peer).
local n = param("ranks", 4)
local k = param("chunks", 1)
collective{ kind = "alltoall", ranks = n, chunks = k, inplace = false,
            name = "moe_combine" .. (k > 1 and "_c" .. k or ""),
            protocol = param("protocol", "Simple"), threads = param("threads", 0),
            tileorder = param("tileorder", "comm"), minbytes = param("minbytes", 0), maxbytes = param("maxbytes", 0),
            placement = param("placement", "split") }
local X = matrix("X", "T", "F")   -- the tokens routed here, grouped by owner; T is the input's rows
local W = matrix("W", "F", "H")   -- the expert's weight
local sync = param("sync", "tile")
for r = 0, n - 1 do
  for q = 0, n - 1 do   -- rank q's tokens: input chunks q*k .. q*k+k-1
    -- this rank's own tokens go straight into its output (no copy)
    gemm(X, W, r, q * k, k, { sync = sync, into = q == r and "output" or "input" })
  end
end
for r = 0, n - 1 do
  for q = 0, n - 1 do
    if q ~= r then chunk(r, "input", q * k, k):copy(q, "output", r * k) end
  end
end

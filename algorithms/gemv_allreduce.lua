-- Fused GEMV + AllReduce for the tensor-parallel row split: rank r holds
-- W_r [M, K] (its K columns of the layer) and x_r [K]; every rank ends with
-- y = sum over r of W_r x_r, M elements, in its output.  Each rank computes
-- its partial product tile by tile in a compute thread block, and every
-- tile is sent on as soon as it is done (docs/FUSED.md).
--   form="allpairs": reduce-scatter then all-gather between all pairs
--       (the one-shot form of the fused computation-collective paper):
--       rank q owns row slice q; every rank computes all its rows, the
--       slices it sends first, and sends slice q to rank q, which reduces
--       the partials as they arrive and sends the sum to everyone.
--   form="ring": ring reduce-scatter then ring all-gather: each rank sends
--       one slice a step, for larger M, where the all-pairs form's n-1
--       messages per step cost more than the ring's extra steps.
-- Parameters: ranks (4), form ("allpairs"), chunks (1: slices each rank
-- owns; more give finer messages), protocol (LL), sync ("tile", "group:G"
-- or "stride:S": how the sends wait on the computed tiles), zerocopy (0; 1:
-- all-pairs only, each remote slice is computed by the thread block that
-- sends it, straight into the peer's memory), tileorder ("comm": the slices
-- that leave the GPU first; "program"), threads (0), instances (1),
-- minbytes / maxbytes (the sizes of y the runtime picks it for), placement
-- ("split"; "paired": a thread block per peer).
local allpairs = require "baton.allpairs"
local ring = require "baton.ring"
local topo = require "baton.topo"
local n = param("ranks", 4)
local form = param("form", "allpairs")
local k = param("chunks", 1)
local zerocopy = param("zerocopy", 0) ~= 0
if form ~= "allpairs" and form ~= "ring" then error("form must be allpairs or ring, not " .. tostring(form)) end
if zerocopy and form ~= "allpairs" then error("zerocopy=1 is for form=allpairs (a ring forwards what it computes)") end
collective{ kind = "allreduce", name = "gemv_allreduce_" .. form .. (k > 1 and "_c" .. k or "") .. (zerocopy and "_zc" or ""),
            ranks = n,
            chunks = n * k, inplace = true, protocol = param("protocol", "LL"), instances = param("instances", 1),
            threads = param("threads", 0), tileorder = param("tileorder", "comm"), placement = param("placement", "split"),
            minbytes = param("minbytes", 0), maxbytes = param("maxbytes", 0) }
local W = matrix("W", "input", "K")   -- a row per element of y, K columns
local x = vector("x", "K")
local sync = param("sync", "tile")
for r = 0, n - 1 do
  for q = 0, n - 1 do   -- slice q: chunks q*k .. q*k+k-1, owned by rank q
    gemv(W, x, r, q * k, k, { sync = sync, zerocopy = zerocopy and q ~= r })
  end
end
if form == "allpairs" then
  allpairs.reduce(topo.range(n), "input", 0, { count = k, chain = true })
  allpairs.all_gather(topo.range(n), "input", 0, { count = k, ch = 1 })
else
  ring.allreduce(topo.range(n), "input", 0, { count = k })
end

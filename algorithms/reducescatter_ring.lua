-- Ring ReduceScatter, in place: the block for rank r starts at rank r+1 and
-- is reduced at every rank on its way to r.  Parameters: ranks (8),
-- channels (1), protocol (Simple), instances (1).
local ring = require "baton.ring"
local topo = require "baton.topo"
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "reducescatter", name = "reducescatter_ring", ranks = n, chunks = channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1) }
for ch = 0, channels - 1 do   -- piece ch of every block goes round ring ch
  ring.reduce_scatter(topo.range(n), "input", function(j) return (j - 1) * channels + ch end, { ch = ch })
end

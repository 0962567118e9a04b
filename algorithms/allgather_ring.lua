-- Ring AllGather, in place: each rank's block goes once around the ring,
-- one ring per channel.  Parameters: ranks (8), channels (1), protocol
-- (Simple), instances (1).
local ring = require "baton.ring"
local topo = require "baton.topo"
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "allgather", name = "allgather_ring", ranks = n, chunks = channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1) }
for ch = 0, channels - 1 do   -- piece ch of every block goes round ring ch
  ring.all_gather(topo.range(n), "output", function(j) return (j - 1) * channels + ch end, { ch = ch })
end

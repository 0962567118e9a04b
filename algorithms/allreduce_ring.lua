-- Ring AllReduce: one ring per channel.  Chunk c starts at rank c+1, is
-- reduced at every rank on its way around the ring and ends complete at
-- rank c, which starts it around the ring once more (all-gather).
-- Parameters: ranks (8), channels (1), protocol (Simple), instances (1), threads (0: BATON_NTHREADS).
local ring = require "baton.ring"
local topo = require "baton.topo"
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "allreduce", name = "allreduce_ring", ranks = n, chunks = n * channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }
for ch = 0, channels - 1 do
  ring.allreduce(topo.range(n), "input", ch * n, { ch = ch })   -- rank c owns chunk ch*n + c
end

-- Ring AllGather, in place: each rank's block goes once around the ring,
-- one ring per channel.  Parameters: ranks (8), channels (1), protocol (Simple).
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "allgather", name = "allgather_ring", ranks = n, chunks = channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1) }
for ch = 0, channels - 1 do
  for r = 0, n - 1 do
    local idx = r * channels + ch                 -- rank r's block, piece ch
    local c = chunk(r, "output", idx)
    for step = 1, n - 1 do
      c = c:copy((r + step) % n, "output", idx, { ch = ch })
    end
  end
end

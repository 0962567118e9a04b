-- Ring AllReduce: one ring per channel.  Chunk c starts at rank c+1, is
-- reduced at every rank on its way around the ring and ends complete at
-- rank c, which starts it around the ring once more (all-gather).
-- Parameters: ranks (8), channels (1), protocol (Simple), instances (1).
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "allreduce", name = "allreduce_ring", ranks = n, chunks = n * channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1) }
for ch = 0, channels - 1 do
  for c = 0, n - 1 do
    local idx = ch * n + c
    local acc = chunk((c + 1) % n, "input", idx)
    for step = 2, n do
      acc = chunk((c + step) % n, "input", idx):reduce(acc, { ch = ch })
    end
    for step = 1, n - 1 do
      acc = acc:copy((c + step) % n, "input", idx, { ch = ch })
    end
  end
end

-- Ring ReduceScatter, in place: the block for rank r starts at rank r+1 and
-- is reduced at every rank on its way to r.  Parameters: ranks (8),
-- channels (1), protocol (Simple).
local n = param("ranks", 8)
local channels = param("channels", 1)
collective{ kind = "reducescatter", name = "reducescatter_ring", ranks = n, chunks = channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1) }
for ch = 0, channels - 1 do
  for r = 0, n - 1 do
    local idx = r * channels + ch
    local acc = chunk((r + 1) % n, "input", idx)
    for step = 2, n do
      acc = chunk((r + step) % n, "input", idx):reduce(acc, { ch = ch })
    end
  end
end

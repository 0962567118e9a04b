-- Ring ReduceScatter: the block for rank r starts at rank r+1 and is
-- reduced at every rank on its way to r.  In place the partial sums land in
-- the input; out of place (inplace=0) in scratch, and the last one in the
-- output.  Parameters: ranks (8), channels (1), protocol (Simple),
-- instances (1), inplace (1).
local ring = require "baton.ring"
local topo = require "baton.topo"
local n = param("ranks", 8)
local channels = param("channels", 1)
local inplace = param("inplace", 1) ~= 0
collective{ kind = "reducescatter", name = inplace and "reducescatter_ring" or "reducescatter_ring_oop", ranks = n,
            chunks = channels, inplace = inplace, protocol = param("protocol", "Simple"),
            instances = param("instances", 1) }
for ch = 0, channels - 1 do   -- piece ch of every block goes round ring ch
  local piece = function(j) return (j - 1) * channels + ch end
  local into = nil
  if not inplace then
    into = function(j, i)   -- block j at its i-th rank: scratch on the way, the output at the end
      if i == n then return "output", ch end
      return "scratch", piece(j)
    end
  end
  ring.reduce_scatter(topo.range(n), "input", piece, { ch = ch, into = into })
end

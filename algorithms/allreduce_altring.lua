-- Alternating-ring AllReduce for rail-optimized multi-node fabrics
-- (nodes x gpus, rank = node * gpus + gpu; across nodes only GPU g links to
-- GPU g).  One ring over all ranks per channel: it enters node m at GPU
-- e(m), visits the node's other GPUs (forwards on even nodes, backwards on
-- odd ones) and leaves at GPU e(m+1), the GPU at which it enters the next
-- node, so every cross-node hop is a rail hop.  Channel ch enters the
-- nodes alternately at GPUs 2ch and 2ch-1, so the channels' cross-node hops
-- together use every rail; odd channels run their ring backwards, so both
-- directions of the links carry traffic.  An odd number of nodes needs 3 or
-- more GPUs per node (the last node enters at 2ch+1).
-- Parameters: nodes (2), gpus (4), channels (gpus/2), protocol (Simple),
-- instances (1).
local ring = require "baton.ring"
local topo = require "baton.topo"
local nodes, gpus = param("nodes", 2), param("gpus", 4)
local channels = param("channels", math.max(1, gpus // 2))
local n = nodes * gpus
if nodes % 2 == 1 and nodes > 1 and gpus == 2 then
  error("alternating rings over an odd number of nodes need 3 or more GPUs per node, not 2")
end
collective{ kind = "allreduce", name = "allreduce_altring", ranks = n, chunks = n * channels,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1),
            topology = { nodes = nodes, gpus = gpus } }

-- The ranks of node m from GPU e to GPU x, in direction dir (+1 or -1);
-- e == x: the whole node, starting at e.
local function path(m, e, x, dir)
  local t = { m * gpus + e }
  for i = 1, gpus - 1 do
    local g = (e + dir * i) % gpus
    if g ~= x then t[#t + 1] = m * gpus + g end
  end
  if x ~= e then t[#t + 1] = m * gpus + x end
  return t
end

local function ring_of(ch)
  local s, entry = (2 * ch) % gpus, {}
  for m = 0, nodes - 1 do entry[m] = m % 2 == 1 and (s - 1) % gpus or s end
  if nodes % 2 == 1 and nodes > 1 then entry[nodes - 1] = (s + 1) % gpus end
  local list = {}
  for m = 0, nodes - 1 do
    for _, r in ipairs(path(m, entry[m], entry[(m + 1) % nodes], m % 2 == 0 and 1 or -1)) do
      list[#list + 1] = r
    end
  end
  return ch % 2 == 1 and topo.reverse(list) or list
end

for ch = 0, channels - 1 do
  ring.allreduce(ring_of(ch), "input", ch * n, { ch = ch })
end

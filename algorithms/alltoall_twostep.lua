-- Two-step AllToAll for nodes x gpus (rank = node * gpus + gpu), out of place.
-- Blocks for the own node go directly.  A block from (n1, g1) for a rank
-- (n2, g2) on another node first moves inside node n1 to GPU g2, the GPU on
-- the destination's rail, which gathers the blocks of all its node's GPUs
-- for (n2, g2) in scratch and sends them across in one message, straight
-- into their place in (n2, g2)'s output: each pair of rail peers exchanges
-- one aggregated message instead of gpus.
-- Parameters: nodes (2), gpus (4), chunks (1: pieces per block), protocol
-- (Simple), instances (1), placement ("split": a thread block per peer and
-- direction; "paired": a peer's send and receive in one, half as many).
local nodes, gpus = param("nodes", 2), param("gpus", 4)
local k = param("chunks", 1)
local n = nodes * gpus
collective{ kind = "alltoall", name = "alltoall_twostep", ranks = n, chunks = k, inplace = false,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            placement = param("placement", "split"), topology = { nodes = nodes, gpus = gpus } }
-- Scratch of GPU (n1, g2): for each other node n2 (in order, skipping n1),
-- gpus blocks, by source GPU g1.
local function slot(n1, n2) return (n2 < n1 and n2 or n2 - 1) * gpus * k end
for src = 0, n - 1 do
  local n1, g1 = src // gpus, src % gpus
  for dst = 0, n - 1 do
    local n2, g2 = dst // gpus, dst % gpus
    local block = chunk(src, "input", dst * k, k)
    if n2 == n1 then
      block:copy(dst, "output", src * k)
    else
      block:copy(n1 * gpus + g2, "scratch", slot(n1, n2) + g1 * k)
    end
  end
end
for via = 0, n - 1 do           -- step 2: one message per rail peer
  local n1, g2 = via // gpus, via % gpus
  for n2 = 0, nodes - 1 do
    if n2 ~= n1 then
      chunk(via, "scratch", slot(n1, n2), gpus * k):copy(n2 * gpus + g2, "output", n1 * gpus * k)
    end
  end
end

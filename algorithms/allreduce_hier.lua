-- Hierarchical AllReduce for nodes x gpus (rank = node * gpus + gpu), in place:
--   1. in every node, a ring reduce-scatter: GPU g ends with the node's sum
--      of block g (nodes chunks, moved in one message per hop);
--   2. across nodes, on every rail g, a ring AllReduce of block g: chunk m
--      of the block is owned by node m;
--   3. in every node, a ring all-gather of the blocks.
-- Cross-node traffic uses only rail links (GPU g to GPU g), which the
-- declared topology checks.  Parameters: nodes (2), gpus (4), protocol
-- (Simple), instances (1).
local ring = require "baton.ring"
local topo = require "baton.topo"
local nodes, gpus = param("nodes", 2), param("gpus", 4)
collective{ kind = "allreduce", name = "allreduce_hier", ranks = nodes * gpus, chunks = gpus * nodes,
            inplace = true, protocol = param("protocol", "Simple"), instances = param("instances", 1),
            topology = { nodes = nodes, gpus = gpus } }
for m = 0, nodes - 1 do        -- block g = chunks g*nodes .. g*nodes+nodes-1
  ring.reduce_scatter(topo.node(m, gpus), "input", 0, { count = nodes })
end
for g = 0, gpus - 1 do
  ring.allreduce(topo.rail(g, nodes, gpus), "input", g * nodes)
end
for m = 0, nodes - 1 do
  ring.all_gather(topo.node(m, gpus), "input", 0, { count = nodes })
end

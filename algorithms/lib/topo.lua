-- baton.topo: rank lists of a machine of `nodes` x `gpus` (rank = node * gpus + gpu).
--
--   local topo = require "baton.topo"
--   topo.range(n)                    {0, 1, ..., n-1}
--   topo.node(node, gpus)            the ranks of one node, by GPU
--   topo.rail(gpu, nodes, gpus)      GPU `gpu` of every node, by node
--   topo.rotate(list, k)             list rotated left by k: list[k+1], ..., list[k]
--   topo.reverse(list)               list in reverse order
--   topo.is_pow2(n)                  n is 1, 2, 4, 8, ...
local topo = {}

function topo.range(n)
  local t = {}
  for i = 0, n - 1 do t[#t + 1] = i end
  return t
end

function topo.node(node, gpus)
  local t = {}
  for g = 0, gpus - 1 do t[#t + 1] = node * gpus + g end
  return t
end

function topo.rail(gpu, nodes, gpus)
  local t = {}
  for m = 0, nodes - 1 do t[#t + 1] = m * gpus + gpu end
  return t
end

function topo.rotate(list, k)
  local t, n = {}, #list
  for i = 1, n do t[i] = list[(i - 1 + k) % n + 1] end
  return t
end

function topo.reverse(list)
  local t, n = {}, #list
  for i = 1, n do t[i] = list[n + 1 - i] end
  return t
end

function topo.is_pow2(n)
  return n >= 1 and n & (n - 1) == 0
end

return topo

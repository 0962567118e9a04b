-- baton.topo: rank lists of a machine of `nodes` x `gpus` (rank = node * gpus + gpu).
--
--   local topo = require "baton.topo"
--   topo.range(n)                    {0, 1, ..., n-1}
--   topo.node(node, gpus)            the ranks of one node, by GPU
--   topo.rail(gpu, nodes, gpus)      GPU `gpu` of every node, by node
--   topo.rotate(list, k)             list rotated left by k: list[k+1], ..., list[k]
--   topo.reverse(list)               list in reverse order
--   topo.is_pow2(n)                  n is 1, 2, 4, 8, ...
--
-- Topologies for collective{topology = ...}: each returns {links = {{a, b}, ...},
-- name = "..."}, the undirected links between ranks a copy or reduce may use.
--   topo.ring_links(n)               ranks 0..n-1 in a ring: r and r+1 mod n
--   topo.line_links(n)               ranks 0..n-1 in a line: r and r+1
--   topo.torus_links(rows, cols)     a rows x cols 2D torus (rank = row * cols + col):
--                                    each row and each column a ring, so
--                                    topo.node(row, cols) and topo.rail(col, rows, cols)
--                                    list a ring of linked ranks
local topo = {}

-- Raises an error naming `fn` unless every value is an integer >= 1.
local function counts(fn, ...)
  for _, v in ipairs({...}) do
    if math.type(v) ~= "integer" or v < 1 then error(fn .. ": sizes must be integers >= 1, not " .. tostring(v), 3) end
  end
end

-- Appends to links those of a ring through the ranks of list (none for
-- one rank, one for two); returns links.
local function ring_of(list, links)
  local n = #list
  if n == 2 then links[#links + 1] = {list[1], list[2]}
  elseif n > 2 then
    for i = 1, n do links[#links + 1] = {list[i], list[i % n + 1]} end
  end
  return links
end

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

-- The children of rank r in the binomial tree over n ranks rooted at 0,
-- where a rank's parent is itself with its lowest set bit cleared:
-- r + 1, r + 2, r + 4, ... below r's lowest set bit (every power of two
-- for rank 0), within n, the smallest subtree first.
function topo.binomial_children(r, n)
  local kids, b = {}, 1
  while r + b < n and (r == 0 or b < r & -r) do
    kids[#kids + 1] = r + b
    b = b * 2
  end
  return kids
end

function topo.ring_links(n)
  counts("topo.ring_links", n)
  return {links = ring_of(topo.range(n), {}), name = "ring of " .. n .. " ranks"}
end

function topo.line_links(n)
  counts("topo.line_links", n)
  local links = {}
  for r = 0, n - 2 do links[#links + 1] = {r, r + 1} end
  return {links = links, name = "line of " .. n .. " ranks"}
end

function topo.torus_links(rows, cols)
  counts("topo.torus_links", rows, cols)
  local links = {}
  for r = 0, rows - 1 do ring_of(topo.node(r, cols), links) end
  for c = 0, cols - 1 do ring_of(topo.rail(c, rows, cols), links) end
  return {links = links, name = rows .. " x " .. cols .. " torus"}
end

return topo

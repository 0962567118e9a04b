-- Alternating rings AllReduce, for the tests of parallelize: instance 0 of
-- the fragment runs the ring forward on piece 0 of every chunk, instance 1
-- backward on piece 1.  Parameters: ranks (4), instances (1).
local n = param("ranks", 4)
collective{ kind = "allreduce", name = "allreduce_alt_rings", ranks = n, chunks = n, inplace = true,
            instances = param("instances", 1) }
parallelize(2, function(i)
  local dir = i == 0 and 1 or -1
  for c = 0, n - 1 do
    local acc = chunk((c + dir) % n, "input", c)
    for s = 2, n do acc = chunk((c + s * dir) % n, "input", c):reduce(acc) end
    for s = 1, n - 1 do acc = acc:copy((c + s * dir) % n, "input", c) end
  end
end)

-- All-pairs AllReduce, in place, for small and medium messages.
--   shot=1: every rank fetches every other rank's whole buffer into scratch
--           and reduces locally (one step of latency, n-1 times the traffic).
--   shot=2: rank r owns chunk r: it gathers chunk r from everyone, reduces,
--           and sends the result back to everyone (reduce-scatter + all-gather).
-- Parameters: ranks (8), shot (2), protocol (LL).
local n = param("ranks", 8)
local shot = param("shot", 2)
local proto = param("protocol", "LL")
if shot == 1 then
  collective{ kind = "allreduce", name = "allreduce_allpairs_1shot", ranks = n, chunks = 1,
              inplace = true, protocol = proto, instances = param("instances", 1) }
  for r = 0, n - 1 do
    for q = 0, n - 1 do
      if q ~= r then chunk(q, "input", 0):copy(r, "scratch", q) end
    end
  end
  for r = 0, n - 1 do
    for q = 0, n - 1 do
      if q ~= r then chunk(r, "input", 0):reduce(chunk(r, "scratch", q)) end
    end
  end
else
  collective{ kind = "allreduce", name = "allreduce_allpairs_2shot", ranks = n, chunks = n,
              inplace = true, protocol = proto, instances = param("instances", 1) }
  for r = 0, n - 1 do
    for q = 0, n - 1 do
      if q ~= r then chunk(q, "input", r):copy(r, "scratch", q) end
    end
  end
  for r = 0, n - 1 do
    for q = 0, n - 1 do
      if q ~= r then chunk(r, "input", r):reduce(chunk(r, "scratch", q)) end
    end
  end
  for r = 0, n - 1 do
    for q = 0, n - 1 do
      if q ~= r then chunk(r, "input", r):copy(q, "input", r) end
    end
  end
end

-- All-pairs AllReduce, in place, for small and medium messages.
--   shot=1: every rank fetches every other rank's whole buffer into scratch
--           and reduces locally (one step of latency, n-1 times the traffic).
--   shot=2: rank r owns chunk r: it gathers chunk r from everyone, reduces,
--           and sends the result back to everyone (reduce-scatter + all-gather).
-- Parameters: ranks (8), shot (2), protocol (LL), instances (1).
local allpairs = require "baton.allpairs"
local topo = require "baton.topo"
local n = param("ranks", 8)
local shot = param("shot", 2)
if shot ~= 1 and shot ~= 2 then error("shot must be 1 or 2, not " .. tostring(shot)) end
collective{ kind = "allreduce", name = "allreduce_allpairs_" .. shot .. "shot", ranks = n,
            chunks = shot == 1 and 1 or n, inplace = true, protocol = param("protocol", "LL"),
            instances = param("instances", 1) }
if shot == 1 then
  allpairs.reduce(topo.range(n), "input", function() return 0 end)   -- everyone owns chunk 0
else
  allpairs.reduce(topo.range(n), "input", 0)                         -- rank r owns chunk r
  allpairs.all_gather(topo.range(n), "input", 0)
end

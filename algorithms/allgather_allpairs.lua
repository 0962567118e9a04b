-- All-pairs AllGather, in place: every rank sends its block straight to
-- every other rank (one step of latency; for small messages).
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (LL),
-- instances (1).
local allpairs = require "baton.allpairs"
local topo = require "baton.topo"
local n = param("ranks", 8)
local k = param("chunks", 1)
collective{ kind = "allgather", name = "allgather_allpairs", ranks = n, chunks = k, inplace = true,
            protocol = param("protocol", "LL"), instances = param("instances", 1) }
allpairs.all_gather(topo.range(n), "output", 0, { count = k })    -- rank r's block is output[r*k ..]

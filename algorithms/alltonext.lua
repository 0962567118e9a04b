-- AllToNext (the fused computation-collective paper's custom collective),
-- out of place: rank r's input becomes rank r+1's output, for r < n-1.
-- Inside a node that is one direct copy.  Across nodes, the last GPU of
-- node m sends to the first GPU of node m+1, which the rails do not link;
-- the transfer is cut into gpus pieces and piece j travels on rail j:
-- (m, gpus-1) -> (m, j) -> (m+1, j) -> (m+1, 0), so all rails share it.
-- Parameters: nodes (2), gpus (4), protocol (Simple), instances (1).
local nodes, gpus = param("nodes", 2), param("gpus", 4)
local n = nodes * gpus
collective{ kind = "custom", name = "alltonext", ranks = n, chunks = gpus, inplace = false,
            expect = "o[r][c]=i[r-1][c] if r>=1",
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            topology = { nodes = nodes, gpus = gpus } }
for r = 0, n - 2 do
  local m = r // gpus
  if (r + 1) // gpus == m then
    chunk(r, "input", 0, gpus):copy(r + 1, "output", 0)
  else
    for j = 0, gpus - 1 do
      local piece = chunk(r, "input", j)
      if j ~= gpus - 1 then piece = piece:copy(m * gpus + j, "scratch", 0) end        -- out on rail j
      if j ~= 0 then piece = piece:copy((m + 1) * gpus + j, "scratch", 1) end        -- across rail j
      piece:copy(r + 1, "output", j)
    end
  end
end

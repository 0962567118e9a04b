collective{kind='allreduce', ranks=2, chunks=2, inplace=true}
local W = matrix('W', 'input', 'K')
local x = vector('x', 'K')
for r = 0, 1 do for q = 0, 1 do gemv(W, x, r, q, 1, {sync = 'group:2'}) end end
for q = 0, 1 do chunk(q, 'input', q):reduce(chunk(1 - q, 'input', q)) end
for q = 0, 1 do chunk(q, 'input', q):copy(1 - q, 'input', q, {ch = 1}) end

collective{kind='alltoall', ranks=3, chunks=1}
for r = 0, 2 do for q = 0, 2 do chunk(r, 'input', q):copy(q, 'output', r, {ch = q % 2}) end end

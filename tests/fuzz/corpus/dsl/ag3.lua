collective{kind='allgather', ranks=3, chunks=1}
for r = 0, 2 do for q = 0, 2 do chunk(r, 'input', 0):copy(q, 'output', r) end end

collective{kind='allreduce', ranks=4, chunks=4, inplace=true}
parallelize(2, function(i)
  local function nxt(r, s) if i == 0 then return (r + s) % 4 else return (r - s) % 4 end end
  for c = 0, 3 do
    local acc = chunk(nxt(c, 1), 'input', c)
    for s = 2, 4 do acc = chunk(nxt(c, s), 'input', c):reduce(acc) end
    for s = 1, 3 do acc = acc:copy(nxt(c, s), 'input', c) end
  end
end)

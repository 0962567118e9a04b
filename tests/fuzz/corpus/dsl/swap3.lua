collective{kind='alltoall', ranks=3, chunks=2, inplace=true, via='direct'}
for t = 1, 2 do
  for r = 0, 2 do
    local q = (r + t) % 3
    if r < q then chunk(r, 'input', q * 2, 1):swap(q, 'input', r * 2)
    else chunk(r, 'input', q * 2 + 1, 1):swap(q, 'input', r * 2 + 1) end
  end
end

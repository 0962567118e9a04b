collective{kind='alltoall', ranks=3, chunks=2, inplace=true, protocol='LL128'}
for r = 0, 2 do
  for q = r + 1, 2 do chunk(r, 'input', q * 2, 2):swap(q, 'input', r * 2) end
end

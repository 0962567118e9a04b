collective{kind='broadcast', ranks=3, chunks=2, inplace=true, via='direct'}
for c = 0, 1 do
  local p = chunk(0, 'input', c)
  for r = 1, 2 do p = p:copy(r, 'output', c, {via = (r == 1) and 'put' or 'get'}) end
end

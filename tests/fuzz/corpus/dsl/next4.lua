collective{kind='custom', ranks=4, chunks=2, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1'}
for r = 0, 2 do chunk(r, 'input', 0, 2):copy(r + 1, 'output', 0) end

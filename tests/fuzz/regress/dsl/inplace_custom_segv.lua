collective{kind='custom', ranks=2, chunks=2, inplace=true, expect='o[r][c]=i[0][c] if r==1'}
chunk(0,'input',0,2):copy(1,'output',0)

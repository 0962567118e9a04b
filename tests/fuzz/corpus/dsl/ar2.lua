collective{kind='allreduce', ranks=2, chunks=2, inplace=true}
chunk(1,'input',0):reduce(chunk(0,'input',0)) chunk(0,'input',1):reduce(chunk(1,'input',1))
chunk(1,'input',0):copy(0,'input',0) chunk(0,'input',1):copy(1,'input',1)

collective{kind='allreduce', ranks=2, chunks=1}
local s = chunk(1, 'input', 0):copy(0, 'tmp', 0)
chunk(0,'input',0):copy(0,'output',0):reduce(s)
local s2 = chunk(0, 'input', 0):copy(1, 'tmp', 0)
chunk(1,'input',0):copy(1,'output',0):reduce(s2)

collective{kind='allreduce', ranks=4096, chunks=65536}

local ring = require 'baton.ring'
collective{kind='reducescatter', ranks=3, chunks=1, inplace=true}
ring.reduce_scatter({0, 1, 2}, 'input', 0)

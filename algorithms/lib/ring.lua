-- baton.ring: the ring phases (reduce, broadcast, reduce-scatter, all-gather,
-- allreduce) over any list of ranks, on one channel.
--
--   local ring = require "baton.ring"
--   ring.reduce(ranks, buffer, index [, opts])          -> ref at ranks[#ranks]
--   ring.broadcast(ref, ranks [, opts])                 -> ref at ranks[#ranks]
--   ring.reduce_scatter(ranks, buffer, index [, opts])  -> {ref at ranks[j], ...}
--   ring.all_gather(ranks, buffer, index [, opts])
--   ring.allreduce(ranks, buffer, index [, opts])
--
-- `ranks` is the ring in order (a Lua list, ranks[1] first); it closes from
-- the last rank back to the first.  In the last three, ranks[j] owns the
-- chunks at index(j) when `index` is a function, at index + (j-1) * count when
-- it is a number.  opts: count (consecutive chunks per message, 1), ch
-- (channel), sendtb / recvtb (those three passed on to copy() and reduce()).
-- opts.into(i) (reduce; reduce_scatter: opts.into(j, i)) -> buffer, index:
-- where ranks[i] (i >= 2) keeps the sum instead of its own chunks, which
-- stay untouched (an out-of-place ReduceScatter may not write its input);
-- the compiler folds the local copy into the receive-reduce.  A ring of
-- one rank asks into(1): its own chunks are the sum, copied there.
local ring = {}

-- The options copy() and reduce() take, out of a phase's opts.
local function step(opts)
  return {ch = opts.ch, sendtb = opts.sendtb, recvtb = opts.recvtb}
end

local function at(index, j, count)
  if type(index) == "function" then return index(j) end
  return index + (j - 1) * count
end

local function check_ranks(ranks)
  if type(ranks) ~= "table" or #ranks < 1 then error("a ring needs a non-empty list of ranks", 3) end
end

-- The chunks at (buffer, index) start at ranks[1]; every further rank adds
-- its own, in order; the sum ends at ranks[#ranks].
function ring.reduce(ranks, buffer, index, opts)
  check_ranks(ranks)
  opts = opts or {}
  local count = opts.count or 1
  local acc = chunk(ranks[1], buffer, index, count)
  if #ranks == 1 and opts.into then return acc:copy(ranks[1], opts.into(1)) end
  for i = 2, #ranks do
    local own = chunk(ranks[i], buffer, index, count)
    if opts.into then own = own:copy(ranks[i], opts.into(i)) end
    acc = own:reduce(acc, step(opts))
  end
  return acc
end

-- Copies ref to ranks[1], then on to ranks[2], ... (each from the one before),
-- at opts.buffer / opts.index (default: ref's own buffer and index).
function ring.broadcast(ref, ranks, opts)
  opts = opts or {}
  local buffer, index = opts.buffer or ref.buffer, opts.index or ref.index
  for i = 1, #ranks do
    ref = ref:copy(ranks[i], buffer, index, step(opts))
  end
  return ref
end

-- The len ranks that follow position j round the ring: ranks[j+1], ranks[j+2], ...
local function after(ranks, j, len)
  local order, n = {}, #ranks
  for s = 1, len do order[s] = ranks[(j + s - 1) % n + 1] end
  return order
end

-- Position j's chunks start at ranks[j+1], go round and end reduced at ranks[j].
function ring.reduce_scatter(ranks, buffer, index, opts)
  check_ranks(ranks)
  opts = opts or {}
  local refs, n = {}, #ranks
  for j = 1, n do
    local o = opts
    if opts.into then
      o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.into = function(i) return opts.into(j, i) end
    end
    refs[j] = ring.reduce(after(ranks, j, n), buffer, at(index, j, opts.count or 1), o)
  end
  return refs
end

-- Position j's chunks go from ranks[j] once round the ring.
function ring.all_gather(ranks, buffer, index, opts)
  check_ranks(ranks)
  opts = opts or {}
  local n, count = #ranks, opts.count or 1
  for j = 1, n do
    ring.broadcast(chunk(ranks[j], buffer, at(index, j, count), count), after(ranks, j, n - 1), opts)
  end
end

-- Reduce-scatter then all-gather, chunk by chunk: position j's chunks are
-- reduced on their way to ranks[j] and go round once more from there.
function ring.allreduce(ranks, buffer, index, opts)
  check_ranks(ranks)
  opts = opts or {}
  local n = #ranks
  for j = 1, n do
    local order = {}
    for s = 1, n do order[s] = ranks[(j + s - 1) % n + 1] end
    local acc = ring.reduce(order, buffer, at(index, j, opts.count or 1), opts)
    order[n] = nil
    ring.broadcast(acc, order, opts)
  end
end

return ring

-- baton.allpairs: direct (all-pairs) phases over any list of ranks.
--
--   local allpairs = require "baton.allpairs"
--   allpairs.reduce(ranks, buffer, index [, opts])      -> {ref at ranks[j], ...}
--   allpairs.all_gather(ranks, buffer, index [, opts])
--
-- ranks[j] owns the chunks at index(j) when `index` is a function, at
-- index + (j-1) * count when it is a number (so a function returning the same
-- index for every j makes every rank an owner: the one-shot AllReduce).
-- opts: count (1), scratch (the scratch buffer's name, "scratch"), output
-- (reduce: the buffer the sum goes to, at the same index; default `buffer`
-- itself, in place), chain (reduce: see below), ch, sendtb / recvtb, via
-- (passed on to copy() and reduce()).
local allpairs = {}

-- The options copy() and reduce() take, out of a phase's opts.
local function step(opts)
  return {ch = opts.ch, sendtb = opts.sendtb, recvtb = opts.recvtb, via = opts.via}
end

local function at(index, j, count)
  if type(index) == "function" then return index(j) end
  return index + (j - 1) * count
end

-- Every other rank sends its copy of ranks[j]'s chunks to ranks[j], into
-- scratch at (position of the sender - 1) * count; then ranks[j] adds them
-- to its own (or, with opts.output, to a copy of its own in that buffer, so
-- that `buffer` is only read).  All copies come first, then all reductions.
-- With opts.chain, ranks[j] reduces each message as it receives it, straight
-- into the sum (receive-reduce steps, one after the other; no scratch, no
-- local reduction pass; the compiler folds the copy to opts.output into the
-- first receive).
function allpairs.reduce(ranks, buffer, index, opts)
  opts = opts or {}
  local n, count, scratch = #ranks, opts.count or 1, opts.scratch or "scratch"
  if opts.chain then
    local refs = {}
    for j = 1, n do
      local idx = at(index, j, count)
      refs[j] = chunk(ranks[j], buffer, idx, count)
      if opts.output then refs[j] = refs[j]:copy(ranks[j], opts.output, idx, step(opts)) end
      for k = 1, n - 1 do
        local i = (j + k - 1) % n + 1   -- the next ranks first: every sender starts with a different receiver
        refs[j] = refs[j]:reduce(chunk(ranks[i], buffer, idx, count), step(opts))
      end
    end
    return refs
  end
  for j = 1, n do
    for i = 1, n do
      if i ~= j then
        chunk(ranks[i], buffer, at(index, j, count), count):copy(ranks[j], scratch, (i - 1) * count, step(opts))
      end
    end
  end
  local refs = {}
  for j = 1, n do
    local idx = at(index, j, count)
    refs[j] = chunk(ranks[j], buffer, idx, count)
    if opts.output then refs[j] = refs[j]:copy(ranks[j], opts.output, idx, step(opts)) end
    for i = 1, n do
      if i ~= j then refs[j] = refs[j]:reduce(chunk(ranks[j], scratch, (i - 1) * count, count), step(opts)) end
    end
  end
  return refs
end

-- ranks[j] sends its chunks straight to every other rank (same buffer and index).
function allpairs.all_gather(ranks, buffer, index, opts)
  opts = opts or {}
  local n, count = #ranks, opts.count or 1
  for j = 1, n do
    for i = 1, n do
      if i ~= j then
        local idx = at(index, j, count)
        chunk(ranks[j], buffer, idx, count):copy(ranks[i], buffer, idx, step(opts))
      end
    end
  end
end

return allpairs

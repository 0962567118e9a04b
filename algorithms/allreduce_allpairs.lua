-- All-pairs AllReduce, in place, for small and medium messages.
--   shot=1: every rank fetches every other rank's whole buffer into scratch
--           and reduces locally (one step of latency, n-1 times the traffic).
--   shot=2: rank r owns chunk r: it gathers chunk r from everyone, reduces,
--           and sends the result back to everyone (reduce-scatter + all-gather).
-- inplace=0 builds the out-of-place program: the input is only read and
-- the sums go straight to the output (an in-place program called out of
-- place first copies the input into the output, one more call per rank).
-- chain=1 reduces every message straight into the sum as it is received
-- (receive-reduce steps one after another; no scratch, no local pass)
-- instead of landing the messages in scratch and adding them up after.
-- agch=1 puts the two-shot's all-gather on channel 1: its receives get
-- thread blocks of their own, so a chain's links are each a thread block's
-- only step (the runtime then runs them in one block, as one step).
-- placement="paired" gives a peer's send and receive one thread block (half
-- as many thread blocks; the default "split" gives each its own).
-- via="direct" (or "put", "get") lowers the copies and reductions between
-- ranks to direct steps instead of FIFO messages (docs/DSL.md, "Direct
-- lowering"): shot=1 with protocol=LL puts every rank's input into every
-- peer's scratch, where the peer reduces it (the one-shot); shot=2 chain=1
-- with protocol=Simple reduces each rank's chunk with getr from its peers'
-- inputs and puts the sum into their outputs (the two-shot).  protocol=LL128
-- puts into the same landings as LL, in 128-byte lines of 120 data bytes
-- and a flag instead of 16-byte lines of 8 (the name ends in _ll128); with
-- shot=2 the owners' sums go back through landings too.
-- stage=1 (shot=2, direct) goes through scratch instead: every rank first
-- copies its input into scratch, its peers reduce from there and put the
-- sums into its scratch, and it copies them into its output, so no peer
-- reaches its input or output (a call needs no peer's buffers: one process
-- per GPU, unregistered buffers), at two local copies' cost.  With
-- via="put" the peers put their pieces of its chunk into its scratch
-- instead, and it reduces them there: one local copy (the sums it gets).
-- Its scratch: n - 1 pieces landed and n - 1 sums gathered, 2(n-1)/n of
-- the message (the message itself on 2 ranks).
-- Parameters: ranks (8), shot (2), protocol (LL), instances (1), inplace (1), threads (0: BATON_NTHREADS),
-- chain (0), agch (0), placement (split), via (fifo), stage (0).
local allpairs = require "baton.allpairs"
local topo = require "baton.topo"
local n = param("ranks", 8)
local shot = param("shot", 2)
local inplace = param("inplace", 1) ~= 0
local chain = param("chain", 0) ~= 0
local via = param("via", "fifo")
local stage = param("stage", 0) ~= 0
if shot ~= 1 and shot ~= 2 then error("shot must be 1 or 2, not " .. tostring(shot)) end
if stage and (shot ~= 2 or via == "fifo") then error("stage=1 is for the direct two-shot (shot=2, via=direct, put or get)") end
-- In place, a one-shot chain cannot sum into the input: rank j's first
-- receive-reduce would overwrite the chunk the ranks after it still have to
-- receive.  It sums into scratch, and a local copy puts the sum back into
-- the input once the rank's own sends have read it.
collective{ kind = "allreduce", name = "allreduce_allpairs_" .. shot .. "shot" .. (chain and "_chain" or "") .. (inplace and "" or "_oop")
                   .. (via ~= "fifo" and "_" .. via or "") .. (stage and "_staged" or "")
            .. (via ~= "fifo" and param("protocol", "LL") == "LL128" and "_ll128" or ""),
            ranks = n, chunks = shot == 1 and 1 or n, inplace = inplace, protocol = param("protocol", "LL"),
            instances = param("instances", 1),
            threads = param("threads", 0), placement = param("placement", "split"), via = via }
local out = inplace and "input" or "output"
if shot == 1 and chain and inplace then
  -- On 2 ranks a rank's send and receive share thread block 0: the sum
  -- then goes straight into the input after the send in program order
  -- (the compiler drops the scratch and the copy).
  -- (A direct program has one thread block per rank anyway.)
  local pin = n == 2 and via == "fifo" and { sendtb = 0, recvtb = 0 } or {}
  local sums = allpairs.reduce(topo.range(n), "input", function() return 0 end,
                               { output = "scratch", chain = true, sendtb = pin.sendtb, recvtb = pin.recvtb })
  for j, ref in ipairs(sums) do ref:copy(j - 1, "input", 0, { sendtb = pin.sendtb }) end
elseif shot == 1 then   -- everyone owns chunk 0
  allpairs.reduce(topo.range(n), "input", function() return 0 end, { output = not inplace and out or nil, chain = chain })
elseif stage then    -- rank r owns chunk r; peers reach only scratch
  -- Puts land the peers' pieces in the owner's scratch themselves: no
  -- copy of the input first (gets need one to read from).
  local from = "input"
  if via ~= "put" then
    for r = 0, n - 1 do chunk(r, "input", 0, n):copy(r, "stage", 0) end
    from = "stage"
  end
  allpairs.reduce(topo.range(n), from, 0, { output = from ~= out and out or nil, chain = true })
  for j = 0, n - 1 do
    for i = 0, n - 1 do
      -- rank i gathers rank j's sum at slot j, or j - 1 past its own
      if i ~= j then chunk(j, out, j):copy(i, "gather", j < i and j or j - 1):copy(i, out, j) end
    end
  end
else                -- rank r owns chunk r
  allpairs.reduce(topo.range(n), "input", 0, { output = not inplace and out or nil, chain = chain })
  allpairs.all_gather(topo.range(n), out, 0, { ch = param("agch", 0) })
end

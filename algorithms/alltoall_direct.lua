-- Direct AllToAll, out of place: every rank sends block q of its input
-- straight to rank q (its own block is a local copy).
-- Parameters: ranks (8), chunks (1: pieces per block), protocol (Simple), threads (0: BATON_NTHREADS),
-- placement ("split": a thread block per peer and direction; "paired": a
-- peer's send and receive share one, half as many), via ("fifo"; "direct",
-- "put" or "get": direct steps instead of FIFO messages, docs/DSL.md,
-- "Direct lowering": Simple puts or gets the blocks straight into the
-- outputs, LL puts them into the receiver's scratch, whence it copies them).
-- inplace=1 (direct): input and output are one buffer; every block goes
-- into the receiver's scratch ("land"), and the receiver copies it into
-- place once its own block for that peer has gone: no copy of the whole
-- input first, and no rank reaches another's buffer.
-- land=1 (direct, out of place): every block goes into the receiver's
-- scratch as in place, and the receiver copies it into its output: no
-- peer reaches another rank's buffers, so it runs where only the windows
-- are reachable (eager calls with a process per GPU).
-- swap=1 (with inplace=1): each pair of ranks trades its two blocks in
-- place instead, no scratch: the lower rank swaps the first half of the
-- chunks, the higher one the rest.  Direct, one xchg step each (protocol
-- Simple); through FIFOs (via="fifo", any protocol), each rank sends its
-- block and receives the peer's over it, piece by piece.
local n = param("ranks", 8)
local k = param("chunks", 1)
local via = param("via", "fifo")
local inplace = param("inplace", 0) ~= 0
local swap = param("swap", 0) ~= 0
if inplace and via == "fifo" and not swap then
  error("inplace=1 through FIFOs needs swap=1 (the blocks through scratch are direct: via=direct, put or get)")
end
if swap and not inplace then error("swap=1 is for the in-place AllToAll (inplace=1)") end
local land = (inplace and not swap) or param("land", 0) ~= 0
if land and via == "fifo" then error("land=1 is for the direct AllToAll (via=direct or put): it puts into scratch") end
if land and swap then error("land=1 and swap=1: the blocks go either through scratch or straight to their place") end
collective{ kind = "alltoall", name = "alltoall_direct" .. (inplace and "_ip" or land and "_land" or "") ..
                                      (swap and "_swap" or "") ..
                                      (via ~= "fifo" and "_" .. via or ""),
            ranks = n, chunks = k,
            inplace = inplace, protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0), placement = param("placement", "split"), via = via }
-- Rank q lands rank r's block at slot(r, q): n - 1 blocks of scratch.
local function slot(r, q) return (r < q and r or r - 1) * k end
-- (The script runs in order, as the ranks would in one program: in place,
-- every block is put before any lands over an input block still to go.)
if swap then
  -- Round t: rank r takes its share of the pair {r, q}, q = r xor t (a
  -- power of 2 ranks: the two of a pair work on it together) or r + t:
  -- no rank's memory serves more than one other rank at a time.
  local h, pow2 = (k + 1) // 2, n & (n - 1) == 0
  for t = 1, n - 1 do
    for r = 0, n - 1 do
      local q = pow2 and r ~ t or (r + t) % n   -- r's block q is q's, q's block r is r's
      if r < q then chunk(r, "input", q * k, h):swap(q, "input", r * k)
      elseif k > h then chunk(r, "input", q * k + h, k - h):swap(q, "input", r * k + h) end
    end
  end
  return
end
for r = 0, n - 1 do
  for q = 0, n - 1 do
    if q ~= r and land then chunk(r, "input", q * k, k):copy(q, "land", slot(r, q))
    elseif not inplace then chunk(r, "input", q * k, k):copy(q, "output", r * k) end
  end
end
if land then
  for q = 0, n - 1 do
    for r = 0, n - 1 do
      if r ~= q then chunk(q, "land", slot(r, q), k):copy(q, "output", r * k) end
    end
  end
end

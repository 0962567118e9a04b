-- Double binary tree AllReduce (NCCL's trees), in place, for any number of
-- ranks.  Tree 0 is the in-order binary tree over ranks 0..n-1: rank r's
-- children are r - b/2 and the first of r + b/2, r + b/4, ... below n (b
-- the lowest set bit of r), and rank 0, its root, has one child, the
-- highest power of two below n; its leaves are the odd ranks.  Tree 1 is
-- tree 0 mirrored (rank x of tree 0 is rank n-1-x) when n is even, shifted
-- by one (rank x+1) when n is odd, so that no rank is a leaf in both.
-- Half of the buffer goes through each tree, in `chunks` pieces: a piece
-- is reduced up to the root (an interior rank adds its children's partial
-- sums into its own and sends the sum on, the last addition and the send
-- one step) and copied back down from there (receive, keep and forward in
-- one step).  Piece after piece, so that every level of both trees works
-- at once; tree t runs on channel t.
-- Parameters: ranks (8), chunks (4: pieces per half, the pipeline depth),
-- protocol (Simple), instances (1), threads (0: BATON_NTHREADS).
local n = param("ranks", 8)
local k = param("chunks", 4)
if k < 1 or k > 32768 then
  error("chunks=" .. k .. " out of range [1, 32768]: the pieces of each half (the buffer has 2 x chunks chunks)")
end
collective{ kind = "allreduce", name = "allreduce_tree", ranks = n, chunks = 2 * k, inplace = true,
            protocol = param("protocol", "Simple"), instances = param("instances", 1),
            threads = param("threads", 0) }

-- Tree 0: children[r], the in-order binary tree.
local function btree()
  local children = {}
  for r = 0, n - 1 do children[r] = {} end
  local top = 1                          -- rank 0's child: the highest power of two below n
  while top * 2 < n do top = top * 2 end
  if n > 1 then children[0] = { top } end
  for r = 1, n - 1 do
    local half = (r & -r) // 2           -- 0 for an odd rank: a leaf
    if half > 0 then children[r][1] = r - half end
    while half > 0 and r + half >= n do half = half // 2 end
    if half > 0 then children[r][2] = r + half end
  end
  return children
end

-- Tree 1: tree 0 with rank x relabelled f(x).
local function relabel(tree, f)
  local children = {}
  for x = 0, n - 1 do
    local kids = {}
    for j, c in ipairs(tree[x]) do kids[j] = f(c) end
    children[f(x)] = kids
  end
  return children
end

local function mirror(x) return n - 1 - x end
local function shift(x) return (x + 1) % n end
local f = n % 2 == 0 and mirror or shift
local tree0 = btree()
local trees = { [0] = tree0, [1] = relabel(tree0, f) }
local roots = { [0] = 0, [1] = f(0) }

-- The sum of input[idx] over r's subtree, reduced into r's input[idx].
local function up(tree, r, idx, ch)
  local acc = chunk(r, "input", idx)
  for _, c in ipairs(tree[r]) do acc = acc:reduce(up(tree, c, idx, ch), { ch = ch }) end
  return acc
end

-- ref (the sum, at rank r) copied to every rank below r.
local function down(tree, ref, r, ch)
  for _, c in ipairs(tree[r]) do down(tree, ref:copy(c, "input", ref.index, { ch = ch }), c, ch) end
end

for j = 0, k - 1 do
  for t = 0, 1 do
    local idx = t * k + j                -- tree t takes chunks t*k .. t*k+k-1
    down(trees[t], up(trees[t], roots[t], idx, t), roots[t], t)
  end
end

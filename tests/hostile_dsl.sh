#!/usr/bin/env bash
# unit suite: hostile algorithm scripts through `baton compile` -- each limit
# stops the script with its line, the limit and the parameter that raises
# it, within bounded time; nothing crashes.
# Usage: hostile_dsl.sh BATON   (TAP output)
set -u
baton=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# check DESCRIPTION WANT_STATUS MAX_SECONDS WANT_TEXT SCRIPT_TEXT [ENV=VALUE...]
check() {
  local what=$1 want=$2 secs=$3 text=$4 src=$5; shift 5
  local k=$((n + 1))   # the script's name follows the check's number (h1.lua: the first)
  printf '%s\n' "$src" > "$tmp/h$k.lua"
  local t0=$SECONDS
  out=$(cd "$tmp" && env "$@" timeout 120 "$baton" compile -q "h$k.lua" -o "$tmp/h$k.xml" 2>&1); st=$?
  local took=$((SECONDS - t0)) pass=0
  [ $st -eq "$want" ] && [ $took -le "$secs" ] && grep -qF -- "$text" <<<"$out" && pass=1
  [ $pass -eq 1 ] && what="$what (${took}s)"
  verdict $pass "$what" "status $st in ${took}s, wanted $want within ${secs}s and '$text'" "$out"
}
check "a collective too large for memory is refused at collective{}" 1 5 \
  "h1.lua:1: ranks=4096 x chunks=65536: allreduce has 536870912 chunks in all ranks' input and output, over the limit of 1048576 (BATON_MAX_CHUNKS raises it)" \
  'collective{kind="allreduce", ranks=4096, chunks=65536}'
check "BATON_MAX_RANKS bounds ranks" 1 5 "h2.lua:1: ranks=16 out of range [1, 8] (BATON_MAX_RANKS raises the limit)" \
  'collective{kind="allreduce", ranks=16}' BATON_MAX_RANKS=8
check "BATON_MAX_CHUNKS bounds scratch that grows" 1 5 "h3.lua:3: scratch[96] on rank 1 makes 101 chunks in all buffers of all ranks, over the limit of 100 (BATON_MAX_CHUNKS raises it)" \
  $'collective{kind="allreduce", ranks=2, chunks=1}\nlocal r = chunk(0, "input", 0)\nfor i = 0, 1e6 do r:copy(1, "scratch", i) end' BATON_MAX_CHUNKS=100
check "an endless ref:copy loop stops at the memory limit" 1 60 \
  "h4.lua:3: memory limit reached: the script and the compiler's structures for it need more than 64 MiB (BATON_COMPILE_MAX_MB raises it)" \
  $'collective{kind="allreduce", ranks=2, chunks=1}\nlocal r = chunk(0, "input", 0)\nwhile true do r = r:copy(1, "scratch", 0) r = r:copy(0, "scratch", 0) end' \
  BATON_COMPILE_MAX_MB=64
check "a Lua table that grows forever stops at the memory limit" 1 60 \
  "h5.lua:2: memory limit reached" $'local t = {}\nwhile true do t[#t + 1] = {} end' BATON_COMPILE_MAX_MB=64
check "an endless loop stops at the instruction limit" 1 30 \
  "h6.lua:1: instruction limit reached: the script ran more than 100000 Lua instructions (or library steps) (BATON_LUA_MAX_INSTRUCTIONS raises it" \
  'while true do end' BATON_LUA_MAX_INSTRUCTIONS=100000
check "pcall cannot catch a limit" 1 30 "h7.lua:1: instruction limit reached" \
  'while true do pcall(function() while true do end end) end' BATON_LUA_MAX_INSTRUCTIONS=100000
check "a backtracking string.find is refused before it runs" 1 5 \
  'h8.lua:2: string.find: the pattern "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*..." on a subject of 40 bytes could take up to' \
  $'local s = string.rep("a", 40)\nreturn s:find(string.rep("a*", 30) .. "b")'
check "library calls stop at the deadline" 1 20 \
  "h9.lua:2: time limit reached: compiling the script took more than 2 s (BATON_COMPILE_TIMEOUT raises it)" \
  $'local s = string.rep("a", 2000)\nwhile true do s:find(".-b") end' BATON_COMPILE_TIMEOUT=2 BATON_LUA_MAX_INSTRUCTIONS=9000000000000000000
check "table.move's loop counts as instructions" 1 10 "h10.lua:1: instruction limit reached" 'table.move({}, 1, 1 << 50, 2)'
check "finalizers are refused" 1 5 "h11.lua:1: setmetatable: a metatable with __gc is not allowed" \
  'setmetatable({}, {__gc = function() while true do end end})'
check "an index near INT_MAX is out of range, not out of memory" 1 5 \
  "h12.lua:2: index out of range: scratch[2147483647..2147483650]" $'collective{kind="allreduce", ranks=2, chunks=1}\nchunk(1, "s", 2147483647, 4)'
check "in place, 'input' and 'output' name one buffer (custom)" 0 30 "" \
  $'collective{kind="custom", ranks=2, chunks=2, inplace=true, expect="o[r][c]=i[0][c] if r==1"}\nchunk(0, "input", 0, 2):copy(1, "output", 0)'
check "in place, 'input' and 'output' name one buffer (allreduce)" 0 30 "" \
  $'collective{kind="allreduce", ranks=2, chunks=1, inplace=true}\nchunk(1, "input", 0):reduce(chunk(0, "input", 0))\nchunk(1, "output", 0):copy(0, "output", 0)'
check "in place, 'input' and 'output' name one buffer (allgather)" 0 30 "" \
  $'collective{kind="allgather", ranks=2, chunks=1, inplace=true}\nfor r = 0, 1 do chunk(r, "input", 0):copy(1 - r, "output", r) end'
# A limit reached before any line ran names the script alone, no line 0.
n=$((n + 1))
awk 'BEGIN { printf "local t = {"; for (i = 0; i < 300000; i++) printf "%d,", i; print "}" }' > "$tmp/huge.lua"
out=$(cd "$tmp" && env BATON_COMPILE_MAX_MB=1 timeout 60 "$baton" compile -q huge.lua -o huge.xml 2>&1); st=$?
want="huge.lua: memory limit reached: the script and the compiler's structures for it need more than 1 MiB (BATON_COMPILE_MAX_MB raises it) (while loading the script)"
if [ $st -eq 1 ] && [ "$out" = "$want" ]; then echo "ok $n - a script too large to load names the script and the parameter"
else echo "not ok $n - a script too large to load (status $st, wanted 1 and exactly '$want')"; echo "$out" | sed 's/^/#   /' | head; failed=$((failed + 1)); fi
check "the instruction limit names the line reached" 1 30 \
  "h$((n + 1)).lua:3: instruction limit reached: the script ran more than 100000 Lua instructions (or library steps) (BATON_LUA_MAX_INSTRUCTIONS raises it" \
  $'local function spin()\n  local i = 0\n  while true do i = i + 1 end\nend\nspin()' BATON_LUA_MAX_INSTRUCTIONS=100000
# A topology's link list is bounded before it is read (a link listed twice
# is an error anyway, so a long list of one link must stop at the limit).
check "BATON_MAX_LINKS bounds a topology's link list" 1 30 \
  "h$((n + 1)).lua:2: topology: 70000 links, over the limit of 65536 (BATON_MAX_LINKS raises it)" \
  $'local l = {} for i = 1, 70000 do l[i] = {0, 1} end\ncollective{kind="allgather", ranks=2, topology={links=l}}'
check "... and BATON_MAX_LINKS raises it" 1 30 "h$((n + 1)).lua:1: topology: 3 links, over the limit of 2 (BATON_MAX_LINKS raises it)" \
  'collective{kind="allgather", ranks=3, topology={links={{0, 1}, {1, 2}, {2, 0}}}}' BATON_MAX_LINKS=2
# Direct programs: a 128-rank all-pairs AllReduce by getr and put (about
# 100,000 steps, every order between ranks a sig and a wait) compiles and
# verifies in bounded time; a script that mixes FIFO and direct operations
# is refused at the line of the first one that disagrees.
check "a 128-rank direct two-shot compiles in bounded time" 0 60 "" \
  $'local allpairs = require "baton.allpairs"\nlocal topo = require "baton.topo"\ncollective{kind="allreduce", ranks=128, chunks=128, inplace=false, via="direct"}\nallpairs.reduce(topo.range(128), "input", 0, {output="output", chain=true})\nallpairs.all_gather(topo.range(128), "output", 0)'
check "a FIFO copy in a direct program names its line" 1 5 \
  "h$((n + 1)).lua:4: copy from rank 1 to rank 0 goes through FIFOs (via='fifo'), but the program is direct (via at h$((n + 1)).lua:3): a program is either FIFO or direct" \
  $'collective{kind="allgather", ranks=2, chunks=1}\nchunk(0, "input", 0):copy(0, "output", 0)\nchunk(0, "input", 0):copy(1, "output", 0, {via="get"})\nchunk(1, "input", 0):copy(0, "output", 1, {via="fifo"})'
check "a field that is not an integer is named" 1 5 "h$((n + 1)).lua:1: chunks=1.5 is not an integer" \
  'collective{kind="allreduce", ranks=2, chunks=1.5}'
check "a missing ranks is named" 1 5 "h$((n + 1)).lua:1: ranks is required (an integer)" 'collective{kind="allreduce"}'
check "BATON_EXPECT_MAX_BYTES bounds the postcondition" 1 5 \
  "h$((n + 1)).lua:1: expect is 302 characters with its vars in place, over the limit of 300 (BATON_EXPECT_MAX_BYTES raises it)" \
  "collective{kind='custom', ranks=2, chunks=1, expect='o[r][c]=i[*][c]$(printf '%*s' 287 '')'}" BATON_EXPECT_MAX_BYTES=300
check "a long postcondition that fails is shown shortened, saying how much is left out" 1 5 \
  "h$((n + 1)).lua:1: postcondition of the custom collective (expect \"o[r][c]=i[*][c]" \
  "collective{kind='custom', ranks=2, chunks=1, expect='o[r][c]=i[*][c]$(printf '%*s' 500 '')'}
for r = 0, 1 do chunk(r, 'input', 0):copy(0, 'output', 0) end"
verdict "$(grep -qF '... (395 more characters)")' <<<"$out" && echo 1 || echo 0)" "... the text ends with '... (395 more characters)'" "shortened wrongly" "$out"
check "a buffer name a typo away from output is an error at its line" 1 5 \
  "h$((n + 1)).lua:2: 'ouput' is not a buffer: did you mean 'output'?" \
  "collective{kind='allgather', ranks=2, chunks=1}
for r = 0, 1 do for q = 0, 1 do chunk(r, 'input', 0):copy(q, 'ouput', r) end end"
check "rounds that would wait on too much are refused in bounded time" 1 10 \
  "h$((n + 1)).lua:4: the operations of this round wait for those of the rank's previous round: more than 16777216 waits between rounds in all (CC_MAX_ROUND_WAITS" \
  "collective{kind='custom', ranks=2, chunks=8192, inplace=false, expect='o[r][c]=i[r][c]'}
for c = 0, 8191 do chunk(0, 'input', c):copy(0, 'tmp', c) end
round()
for c = 0, 8191 do chunk(0, 'tmp', c):copy(0, 'output', c) end
for c = 0, 8191 do chunk(1, 'input', c):copy(1, 'output', c) end"
# A script that never ends (/dev/zero): reading stops at BATON_SCRIPT_MAX_MB with a message (it read until the
# OOM killer came, or exited 1 with no word under ulimit -v).
n=$((n + 1))
t0=$SECONDS
out=$(BATON_SCRIPT_MAX_MB=4 timeout 60 "$baton" compile -q /dev/zero -o "$tmp/z.xml" 2>&1); st=$?
if [ $st -eq 1 ] && [ $((SECONDS - t0)) -le 10 ] && grep -qF "/dev/zero: the script is over the limit of 4 MiB (BATON_SCRIPT_MAX_MB raises it)" <<<"$out"; then
  echo "ok $n - compile /dev/zero stops at BATON_SCRIPT_MAX_MB"
else echo "not ok $n - compile /dev/zero (status $st): $out" | head -3; failed=$((failed + 1)); fi
tap_end

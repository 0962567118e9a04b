collective{kind="allreduce", ranks=4, chunks=1, inplace=true}
for _, d in ipairs({1, 2}) do
  for r = 0, 3 do
    if r < r ~ d then exchange(chunk(r, "input", 0), chunk(r ~ d, "input", 0), {scratch = "x"}) end
  end
end

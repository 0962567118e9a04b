local s = string.rep('a', 40)
return s:find(string.rep('a*', 30) .. 'b')

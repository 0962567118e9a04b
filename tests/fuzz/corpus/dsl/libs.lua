local t = setmetatable({}, {__index = function(t, k) return k .. k end})
print(t.ab, ('%5.2f'):format(1/3), table.concat({1, 2, 3}, ','), utf8.char(72, 228))
for w in ('a b c'):gmatch('%a') do end

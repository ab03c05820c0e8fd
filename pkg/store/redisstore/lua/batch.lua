-- Several requests, each on its own key, in one script call (see
-- batchSource in redisstore.go, which puts before this the table scripts:
-- each algorithm's script as a function of KEYS and ARGV, by letter).
-- KEYS     the requests' keys, in order
-- ARGV     for each key in turn: its script's letter, the number n of the
--          script's arguments, and those n arguments
-- Returns  for each key in turn: the length of its script's reply, then
--          the reply; or -1 when its script failed (the caller runs that
--          request again on its own, to get the error: every script fails,
--          if it does, before it writes anything but the log's removal of
--          expired entries, which a second run repeats harmlessly)
local out, a = {}, 1
for k = 1, #KEYS do
  local run, n = scripts[ARGV[a]], tonumber(ARGV[a + 1])
  local ok, r = pcall(run, {KEYS[k]}, {unpack(ARGV, a + 2, a + 1 + n)})
  if ok then
    out[#out + 1] = #r
    for j = 1, #r do
      out[#out + 1] = r[j]
    end
  else
    out[#out + 1] = -1
  end
  a = a + 2 + n
end
return out

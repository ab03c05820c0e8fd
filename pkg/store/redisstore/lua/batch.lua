-- Several requests, each on its own key, in one script call (see
-- batchSource in redisstore.go, which puts before this the table scripts:
-- each algorithm's script as a function by letter).
--
-- A script function is called as f(key, mode, now, admittedAt, argv,
-- first, out, o): mode "d" decides, "r" refunds a cost admitted at
-- admittedAt (Unix ms); now is the decision's Unix ms; the algorithm's own
-- arguments are argv[first], argv[first + 1], ...; it writes its reply at
-- out[o], out[o + 1], ... after its last command (so a script that fails
-- has written nothing there) and returns how many values it wrote. A
-- script sent alone (scriptSource) is the same function, called once.
--
-- KEYS     the requests' keys, in order
-- ARGV     mode, now ms, admittedAt ms (0 for decisions), then for each
--          key in turn: its script's letter, the number n of its own
--          arguments, and those n arguments; or "=" alone, for the same
--          script and arguments as the key before (a batch's requests are
--          mostly of one rule, and each argument costs Redis its parsing)
-- Returns  for each key in turn: the length of its script's reply, then
--          the reply; or -1 when its script failed (the caller runs that
--          request again on its own, to get the error: every script fails,
--          if it does, before it writes anything but the log's removal of
--          expired entries, which a second run repeats harmlessly)
local mode, now, admittedAt = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out, o, a = {}, 1, 4
local f, args
for k = 1, #KEYS do
  if ARGV[a] == '=' then
    a = a + 1
  else
    -- Every own argument is a number: parsed here once for the run of
    -- requests that share them, into a table of the run's own (ARGV is
    -- left as Redis gave it).
    f, args = scripts[ARGV[a]], {}
    local n = tonumber(ARGV[a + 1])
    for i = 1, n do
      args[i] = tonumber(ARGV[a + 1 + i])
    end
    a = a + 2 + n
  end
  local ok, n = pcall(f, KEYS[k], mode, now, admittedAt, args, 1, out, o + 1)
  if ok then
    out[o] = n
    o = o + 1 + n
  else
    out[o] = -1
    o = o + 1
  end
end
return out

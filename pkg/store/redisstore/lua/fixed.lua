-- Fixed window counter (see pkg/algorithm/window.go), the body of a
-- script function (see batch.lua).
-- key      packed (packed.lua): the window start in Unix ms, the cost
--          admitted in it, the window tag
-- argv     from first: window ms, limit, cost, count rejected ("1": a
--          rejected cost is counted too); for a window of 0 (calendar
--          months, placed by the caller): the start and end ms of the
--          window holding now, the start of the one holding admittedAt
-- Writes   allowed, window start, count
-- Commands: GET, then SET ... PX only when the state changes (SET ...
-- KEEPTTL when the key held this window under the same tag). The TTL
-- lasts until the window ends plus a second, plus how long into the window
-- the write came (modulo an hour): W + 1 s after the window's first
-- write, for W <= 1 h.
local w = tonumber(argv[first])
local limit = tonumber(argv[first + 1])
local cost = tonumber(argv[first + 2])

local start, finish, atStart, keep
if w == 0 then
  start = tonumber(argv[first + 4])
  finish = tonumber(argv[first + 5])
  atStart = tonumber(argv[first + 6])
  -- A later window's state (a clock ahead) ends at most a longest month
  -- after its start.
  keep = 31 * 86400000
else
  start = now - (now % w)
  keep = w
end
local from, sw, count, tag = loadState(key, fixedFormat, w == 0 or w >= carryMs)
-- A write in the window the key holds, for the same window length, keeps
-- the TTL the window's first write set (packed.lua).
local keepTTL = keepsTTL(from, tag, w)
if sw == nil or count == nil or sw < start then
  sw = start
  count = 0
  keepTTL = false
end

local allowed = 0
local write = false
if mode == 'd' then
  if count + cost <= limit then
    allowed = 1
  end
  if (allowed == 1 or tonumber(argv[first + 3]) == 1) and cost > 0 then
    count = count + cost
    write = true
  end
else
  if w ~= 0 then
    atStart = admittedAt - (admittedAt % w)
  end
  if sw == atStart then
    count = count - cost
    if count < 0 then count = 0 end
    write = true
  end
end

if write and keepTTL then
  redis.call('SET', key, struct.pack(fixedFormat, sw, count, windowTag(w)), 'KEEPTTL')
elseif write then
  local ends = sw + keep
  if sw == start and finish then ends = finish end
  -- Keys last written across a window expire across as long a span (at
  -- most an hour), not all at the instant the window stops mattering.
  local span = keep
  if span > 3600000 then span = 3600000 end
  local spread = (now - sw) % span
  redis.call('SET', key, struct.pack(fixedFormat, sw, count, windowTag(w)), 'PX', string.format('%d', ends - now + 1000 + spread))
end
out[o], out[o + 1], out[o + 2] = allowed, sw, count
return 3

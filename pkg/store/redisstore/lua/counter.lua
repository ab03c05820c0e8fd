-- Sliding window counter (see pkg/algorithm/window.go), the body of a
-- script function (see batch.lua).
-- key      packed (packed.lua): the current window start in Unix ms, its
--          count, the previous window's count, the window tag
-- argv     from first: window ms, limit, cost
-- Writes   allowed, window start, count, previous count
-- Commands: GET, then SET ... PX only when the state changes (SET ...
-- KEEPTTL when the key held this window under the same tag). The TTL
-- lasts until the next window ends plus a second, plus how long into the
-- window the write came (modulo an hour): 2W + 1 s after the window's
-- first write, for W <= 1 h.
local w = tonumber(argv[first])
local limit = tonumber(argv[first + 1])
local cost = tonumber(argv[first + 2])

local start = now - (now % w)
local from, sw, count, prev, tag = loadState(key, slidingFormat, 2 * w >= carryMs)
-- A write in the window the key holds, for the same window length, keeps
-- the TTL the window's first write set (packed.lua).
local keepTTL = false
if sw == nil or count == nil or prev == nil then
  sw, count, prev = start, 0, 0
elseif sw >= start then
  -- current window (or a clock ahead of ours): keep
  keepTTL = keepsTTL(from, tag, w)
elseif sw == start - w then
  sw, prev, count = start, count, 0
else
  sw, count, prev = start, 0, 0
end

local allowed = 0
local write = false
if mode == 'd' then
  local est = count
  if prev > 0 then
    local elapsed = now - sw
    if elapsed < 0 then elapsed = 0 end
    if elapsed > w then elapsed = w end
    -- Same IEEE operations, in the same order, as algorithm.weighted.
    est = est + math.ceil(prev * (w - elapsed) / w)
  end
  if est + cost <= limit then
    allowed = 1
    if cost > 0 then
      count = count + cost
      write = true
    end
  end
else
  local as = admittedAt - (admittedAt % w)
  if as == sw then
    count = count - cost
    if count < 0 then count = 0 end
    write = true
  elseif as == sw - w then
    prev = prev - cost
    if prev < 0 then prev = 0 end
    write = true
  end
end

if write and keepTTL then
  redis.call('SET', key, struct.pack(slidingFormat, sw, count, prev, windowTag(w)), 'KEEPTTL')
elseif write then
  -- Keys last written across a window expire across as long a span (at
  -- most an hour), not all at the instant the window stops weighing.
  local spread = (now - sw) % math.min(w, 3600000)
  redis.call('SET', key, struct.pack(slidingFormat, sw, count, prev, windowTag(w)), 'PX', string.format('%d', sw + 2 * w - now + 1000 + spread))
end
out[o], out[o + 1], out[o + 2], out[o + 3] = allowed, sw, count, prev
return 4

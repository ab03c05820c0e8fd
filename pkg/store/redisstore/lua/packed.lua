-- The packed states of the counter algorithms, put before their script
-- functions (see scriptSource and batchSource in redisstore.go).
--
-- Layout 3 (tags tb3, lb3, fw3, sc3) keeps a state's two or three
-- numbers as little-endian IEEE doubles, which Redis's Lua reads and
-- writes without parsing or printing decimals: a bucket's as
-- struct.pack('<dd'), 16 bytes; a window counter's followed by its
-- window tag (windowTag) as an unsigned 32-bit integer, '<ddI4' or
-- '<dddI4', 20 or 28 bytes. Layout 2 (tags tb2, lb2, fw2, sc2) held the
-- same numbers as decimals, "<a>:<b>" or "<a>:<b>:<c>".
--
-- The window tag says which window length the key's TTL was set for. A
-- write that keeps a window counter in the window it read, under the
-- same tag, keeps the key's TTL (SET ... KEEPTTL), which the write that
-- began that window set long enough for it: for limiters whose clocks
-- lag that write's by up to the TTL's second of slack. That spares Redis
-- the TTL's removal and setting again (a hash lookup each in its table
-- of expiries) on every decision but a window's first. A rule whose
-- window changed reads another tag and sets the TTL afresh: kept, a TTL
-- set for a shorter window would let the state expire while it still
-- counts.
local bucketFormat, fixedFormat, slidingFormat = '<dd', '<ddI4', '<dddI4'
local stateSize = {[bucketFormat] = 16, [fixedFormat] = 20, [slidingFormat] = 28}

-- windowTag returns the tag of a window of w ms: w itself (0 for
-- calendar months, 1 ms and up for rolling windows), or longTag for a
-- window of 2^32 - 1 ms (49.7 days) or more, which no write keeps a TTL
-- under: so no two windows share a tag that keeps one.
local longTag = 4294967295
local function windowTag(w)
  if w >= longTag then
    return longTag
  end
  return w
end

-- keepsTTL says whether a write of a window counter's state, in the
-- window it read from the key (from, as loadState returns it) under
-- tag, keeps the key's TTL: the key held a state of this layout, under
-- the tag of w, a window shorter than longTag.
local function keepsTTL(from, tag, w)
  return from == 'key' and tag == windowTag(w) and tag ~= longTag
end

-- carryMs: from how long a state lasts — a window, or the time a bucket
-- takes to drain when full — a key with no layout-3 state starts from its
-- layout-2 state, if it has one, so that moving to this layout gives no
-- long-window key its limit afresh. A shorter-lived state starts fresh:
-- it loses at most that long's counts, once, and spares Redis a second
-- GET for every new key.
local carryMs = 60000

-- oldKey returns the layout-2 name of key: the same name with the tag's
-- version 2, so the same hash tag and Redis Cluster slot.
local function oldKey(key)
  return string.sub(key, 1, -2) .. '2'
end

-- loadState reads the state of key, packed with format (one of the
-- three above). It returns where the state came from, then its numbers:
-- 'key' when key holds a value (with no numbers for a value of another
-- shape, which reads as fresh); 'old' when key holds nothing, carry is
-- true (a long-lived state) and the layout-2 key holds a state, with no
-- window tag; false when there is none.
local function loadState(key, format, carry)
  local v = redis.call('GET', key)
  if v then
    if #v ~= stateSize[format] then
      return 'key'
    end
    -- Each double must be an integer: x % 1 is NaN for an infinity or a
    -- NaN, and never 0. (A tag of another window needs no check.)
    if format == slidingFormat then
      local a, b, c, tag = struct.unpack(format, v)
      if a % 1 ~= 0 or b % 1 ~= 0 or c % 1 ~= 0 then
        return 'key'
      end
      return 'key', a, b, c, tag
    end
    -- (For a bucket, the third value is where unpacking stopped.)
    local a, b, tag = struct.unpack(format, v)
    if a % 1 ~= 0 or b % 1 ~= 0 then
      return 'key'
    end
    if format == fixedFormat then
      return 'key', a, b, tag
    end
    return 'key', a, b
  end
  if not carry then
    return false
  end
  -- A layout-2 key of another type (no Weir limiter writes one) reads
  -- as no state rather than failing the decision.
  v = redis.pcall('GET', oldKey(key))
  if type(v) ~= 'string' then
    return false
  end
  local x, y, z
  if format == slidingFormat then
    x, y, z = string.match(v, '^(-?%d+):(-?%d+):(-?%d+)$')
  else
    x, y = string.match(v, '^(-?%d+):(-?%d+)$')
  end
  if x == nil then
    return false
  end
  return 'old', tonumber(x), tonumber(y), tonumber(z)
end

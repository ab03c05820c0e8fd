-- The packed states of the counter algorithms, put before their script
-- functions (see scriptSource and batchSource in redisstore.go).
--
-- Layout 3 (tags tb3, lb3, fw3, sc3) keeps a state's two or three
-- numbers as little-endian IEEE doubles, struct.pack('<dd') or ('<ddd'):
-- 16 or 24 bytes that Redis's Lua reads and writes without parsing or
-- printing decimals. Layout 2 (tags tb2, lb2, fw2, sc2) held the same
-- numbers as decimals, "<a>:<b>" or "<a>:<b>:<c>".
--
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

-- loadState reads the state of key, n numbers (2 or 3). It returns where
-- the state came from, then its numbers: 'key' when key holds a value
-- (with no numbers for a value of another shape, which reads as fresh);
-- 'old' when key holds nothing, carry is true (a long-lived state) and
-- the layout-2 key holds a state; false when there is none.
local function loadState(key, n, carry)
  local v = redis.call('GET', key)
  if v then
    if #v ~= 8 * n then
      return 'key'
    end
    -- Each number must be an integer: x % 1 is NaN for an infinity or a
    -- NaN, and never 0.
    local a, b, c = struct.unpack(n == 2 and '<dd' or '<ddd', v)
    if a % 1 ~= 0 or b % 1 ~= 0 or (n == 3 and c % 1 ~= 0) then
      return 'key'
    end
    if n == 2 then
      return 'key', a, b
    end
    return 'key', a, b, c
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
  if n == 2 then
    x, y = string.match(v, '^(-?%d+):(-?%d+)$')
  else
    x, y, z = string.match(v, '^(-?%d+):(-?%d+):(-?%d+)$')
  end
  if x == nil then
    return false
  end
  return 'old', tonumber(x), tonumber(y), tonumber(z)
end

-- packState returns the layout-3 value of a state's numbers (two or
-- three).
local function packState(a, b, c)
  if c == nil then
    return struct.pack('<dd', a, b)
  end
  return struct.pack('<ddd', a, b, c)
end

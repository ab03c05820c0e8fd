-- The packed states of the counter algorithms, put before their script
-- functions (see scriptSource and batchSource in redisstore.go).
--
-- Layout 3 (tags tb3, lb3, fw3, sc3) keeps a state's two or three
-- numbers as little-endian IEEE doubles, struct.pack('<dd') or ('<ddd'):
-- 16 or 24 bytes that Redis's Lua reads and writes without parsing or
-- printing decimals. Layout 2 (tags tb2, lb2, fw2, sc2) held the same
-- numbers as decimals, "<a>:<b>" or "<a>:<b>:<c>".
--
-- carryMs: the window (or a bucket's refill period) from which a key with
-- no layout-3 state starts from its layout-2 state, if it has one, so
-- that moving to this layout gives no long-window key its limit afresh.
-- A shorter window's key starts fresh: it loses at most two windows of
-- counts once, and spares Redis a second GET for every new key.
local carryMs = 60000

-- load reads the state of key, n numbers (2 or 3): it returns whether key
-- holds a value, then the state's numbers, or no numbers for a value of
-- another shape (which reads as fresh). carry (a long window): when key
-- holds nothing, the numbers come from its layout-2 key (same name, tag
-- ending in 2, same hash slot) if that holds a state, and the first value
-- is still false: key itself has no value and no TTL yet.
local function load(key, n, carry)
  local v = redis.call('GET', key)
  if v then
    if #v ~= 8 * n then
      return true
    end
    -- Each number must be an integer: x % 1 is NaN for an infinity or a
    -- NaN, and never 0.
    local a, b, c = struct.unpack(n == 2 and '<dd' or '<ddd', v)
    if a % 1 ~= 0 or b % 1 ~= 0 or (n == 3 and c % 1 ~= 0) then
      return true
    end
    if n == 2 then
      return true, a, b
    end
    return true, a, b, c
  end
  if not carry then
    return false
  end
  -- A layout-2 key of another type (no Weir limiter writes one) reads
  -- as no state rather than failing the decision.
  v = redis.pcall('GET', string.sub(key, 1, -2) .. '2')
  if type(v) ~= 'string' then
    return false
  end
  if n == 2 then
    local x, y = string.match(v, '^(-?%d+):(-?%d+)$')
    return false, tonumber(x), tonumber(y)
  end
  local x, y, z = string.match(v, '^(-?%d+):(-?%d+):(-?%d+)$')
  return false, tonumber(x), tonumber(y), tonumber(z)
end

-- pack returns the layout-3 value of a state's numbers (two or three).
local function pack(a, b, c)
  if c == nil then
    return struct.pack('<dd', a, b)
  end
  return struct.pack('<ddd', a, b, c)
end

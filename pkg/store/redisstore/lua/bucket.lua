-- Token bucket and leaky bucket: one meter (see pkg/algorithm/bucket.go).
-- KEYS[1]  hash {l = fill in 1/window-ms tokens, t = Unix ms of last update}
-- ARGV     mode ("d" decide | "r" refund), now ms, window ms, limit,
--          capacity, cost, at ms (refund: when the refunded request was
--          admitted)
-- Returns  {allowed, fill, last}
local key = KEYS[1]
local mode = ARGV[1]
local now = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5])
local cost = tonumber(ARGV[6])

local v = redis.call('HMGET', key, 'l', 't')
local level = tonumber(v[1]) or 0
local last = tonumber(v[2]) or 0
if now > last then
  if limit == 0 then
    last = now
  elseif (now - last) * limit >= level then
    level = 0
    last = now
  else
    level = level - (now - last) * limit
    last = now
  end
end

local allowed = 0
local write = false
if mode == 'd' then
  if level + cost * w <= capacity * w then
    allowed = 1
    if cost > 0 then
      level = level + cost * w
      write = true
    end
  end
else
  -- Give back what the request still holds: its cost less what drained
  -- since it was admitted (as algorithm.refundBucket).
  local give = cost * w
  local elapsed = now - tonumber(ARGV[7])
  if elapsed > 0 and limit > 0 then
    if elapsed * limit >= give then
      give = 0
    else
      give = give - elapsed * limit
    end
  end
  level = level - give
  if level < 0 then level = 0 end
  write = true
end

if write then
  if level == 0 or limit == 0 then
    -- A drained bucket, or one that never drains, is as good as fresh.
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'l', string.format('%d', level), 't', string.format('%d', last))
    local ttl = last - now + math.ceil(level / limit) + 1000
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  end
end
return {allowed, level, last}

-- Sliding window log (see pkg/algorithm/log.go), the body of a script
-- function (see batch.lua).
-- key      sorted set: one member per admitted unit of cost, scored by its
--          Unix ms; members at one score are named "<ms>:0" .. "<ms>:n-1".
-- argv     from first: window ms, limit, cost
-- Writes   allowed, count, newest ms, kth ms (see algorithm.LogView)
-- Commands: ZREMRANGEBYSCORE and ZCARD always; the newest entry is read
-- once (ZRANGE) and not at all for an empty log; an admission adds ZCOUNT
-- only when its stamp already has entries, then ZADD and PEXPIRE; a
-- rejection adds a ZRANGE for the k-th entry; a refund ZCOUNT and ZREM.
local w = tonumber(argv[first])
local limit = tonumber(argv[first + 1])
local cost = tonumber(argv[first + 2])

local function fmt(n) return string.format('%d', n) end
local count
-- newest returns the score of the log's newest entry, or 0 if it is empty.
local function newest()
  if count == 0 then return 0 end
  local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return 0
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - w))
count = redis.call('ZCARD', key)
local allowed = 0
local nw
if mode == 'd' then
  if count + cost <= limit then
    allowed = 1
    nw = newest()
    if cost > 0 then
      -- Keep the log sorted when this clock is behind the newest entry.
      local at = now
      if nw > at then at = nw end
      local base = 0
      if nw == at then
        base = redis.call('ZCOUNT', key, fmt(at), fmt(at))
      end
      local ats = fmt(at)
      local i = 0
      while i < cost do
        local args = {}
        local j = 0
        while i < cost and j < 500 do
          args[#args + 1] = ats
          args[#args + 1] = ats .. ':' .. fmt(base + i)
          i = i + 1
          j = j + 1
        end
        redis.call('ZADD', key, unpack(args))
      end
      count = count + cost
      nw = at
      redis.call('PEXPIRE', key, fmt(at + w - now + 1000))
    end
  end
else
  local ats = fmt(admittedAt)
  local n = redis.call('ZCOUNT', key, ats, ats)
  local k = 0
  while k < cost and n > 0 do
    local args = {}
    local j = 0
    while k < cost and n > 0 and j < 500 do
      n = n - 1
      args[#args + 1] = ats .. ':' .. fmt(n)
      k = k + 1
      j = j + 1
    end
    redis.call('ZREM', key, unpack(args))
  end
  count = count - k
end

local kth = 0
if allowed == 0 and mode == 'd' then
  local k = count + cost - limit - 1
  if k >= 0 and k < count then
    local r = redis.call('ZRANGE', key, k, k, 'WITHSCORES')
    if r[2] then kth = tonumber(r[2]) end
  end
end
if nw == nil then nw = newest() end
out[o], out[o + 1], out[o + 2], out[o + 3] = allowed, count, nw, kth
return 4

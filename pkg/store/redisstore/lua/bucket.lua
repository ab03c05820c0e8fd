-- Token bucket and leaky bucket: one meter (see pkg/algorithm/bucket.go),
-- the body of a script function (see batch.lua).
-- key      packed (packed.lua): the fill in 1/window-ms tokens, the Unix ms
--          of its last update
-- argv     from first: window ms, limit, capacity, cost
-- Writes   allowed, fill, last
-- Commands: GET (and GET of the layout-2 key, for a long-lived bucket
-- with no state: packed.lua), then SET ... PX (or DEL, for an empty
-- bucket; SET ... KEEPTTL at a limit of 0, or PTTL of the layout-2 key and
-- SET ... PX for a fill read from it) only when
-- the state changes: an admission, a refund, or an observation (cost 0)
-- of a bucket that drained since its last write (at a limit of 0, whose
-- clock moved). The observation settles
-- the drain at the rate in force, so that the bucket drains from the
-- fill it read at the rate of later calls (a usage reading is then an
-- upper bound of what the bucket holds until its next admission).
local w = tonumber(argv[first])
local limit = tonumber(argv[first + 1])
local capacity = tonumber(argv[first + 2])
local cost = tonumber(argv[first + 3])

-- (A full bucket drains in capacity * w / limit ms: that long-lived a
-- state starts from its layout-2 key; at a limit of 0, which drains
-- nothing, always.)
local from, level, last = loadState(key, bucketFormat, capacity * w >= carryMs * limit)
if level == nil or last == nil then
  level, last = 0, 0
end
local stored, storedLast = level, last
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
  if cost == 0 and from and (level ~= stored or last ~= storedLast) then
    -- (At a limit of 0 only the time moves: it is written too, so that a
    -- limit given back drains from this observation, as package
    -- algorithm's state does, not from the last write.)
    write = true
  end
else
  -- Give back what the request still holds: its cost less what drained
  -- since it was admitted (as algorithm.refundBucket).
  local give = cost * w
  local elapsed = now - admittedAt
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
  if level == 0 then
    -- A drained bucket is as good as fresh.
    if from == 'key' then redis.call('DEL', key) end
  elseif limit == 0 then
    -- At a limit of 0 nothing drains: the fill stays until the key's TTL,
    -- set under the last positive limit, when it would have drained at
    -- that rate (algorithm.Expiry; storetest's "fill kept at a limit of
    -- zero"). Deleting it let a DC that gave its share up and got it back
    -- admit its whole capacity again. A fill read from the layout
    -- before takes the old key's TTL, which is the one to keep.
    if from == 'key' then
      redis.call('SET', key, struct.pack(bucketFormat, level, last), 'KEEPTTL')
    else
      local ttl = redis.call('PTTL', oldKey(key))
      if ttl > 0 then
        redis.call('SET', key, struct.pack(bucketFormat, level, last), 'PX', ttl)
      end
    end
  else
    local ttl = last - now + math.ceil(level / limit) + 1000
    redis.call('SET', key, struct.pack(bucketFormat, level, last), 'PX', string.format('%d', ttl))
  end
end
out[o], out[o + 1], out[o + 2] = allowed, level, last
return 3

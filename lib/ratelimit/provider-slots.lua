--[[
  Provider slots: a counting semaphore of `limit` calls in flight, shared by every process.

  The holders are a sorted set: member = holder id (one per call), score = the holder's lease
  expiry (Redis time, ms). Every call first drops the holders whose lease has expired, so a
  slot held by a crashed worker (never released) comes back once its lease runs out; a live
  holder renews its lease while its call runs. Release is a plain ZREM of the holder.
  Time comes from Redis TIME, never from a client, so every process shares one clock.

    Input:
      KEYS[1] holders sorted set (one provider; hash-tagged, so one cluster slot)

      ARGV[1] mode: "acquire" (take a slot if one is free) or "renew" (extend a held lease)
      ARGV[2] holder id (unique per call)
      ARGV[3] limit: calls in flight at once (>= 1)
      ARGV[4] leaseMs: how long a slot stays held without a renewal (> 0)

    Output: { ok, inFlight, waitMs }
      acquire: ok 1 when the holder now holds a slot (or already held one: lease extended),
               0 when all `limit` slots are held (nothing written but the expired holders dropped)
      renew:   ok 1 when the lease was extended, 0 when the holder no longer holds a slot (its
               lease expired and it was dropped: it must not come back in over the limit)
      inFlight holders after the call
      waitMs   0 when ok, else whole ms (rounded up) until the earliest lease expires: the longest
               a slot can stay taken unless its holder renews it
]]
local key = KEYS[1]
local mode = ARGV[1]
local holder = ARGV[2]
local limit = tonumber(ARGV[3])
local leaseMs = tonumber(ARGV[4])

local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local expiry = string.format("%.3f", now + leaseMs)

-- Expired leases first: a crashed holder's slot is free again from here on.
redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("(%.3f", now))

local held = redis.call("ZSCORE", key, holder)
local ok = 0
if held then
  redis.call("ZADD", key, expiry, holder)
  ok = 1
elseif mode == "acquire" and redis.call("ZCARD", key) < limit then
  redis.call("ZADD", key, expiry, holder)
  ok = 1
end

local inFlight = redis.call("ZCARD", key)
local waitMs = 0
if ok == 1 then
  -- The set outlives its longest lease, no more: an idle provider leaves no key behind.
  if redis.call("PTTL", key) < leaseMs then redis.call("PEXPIRE", key, math.ceil(leaseMs)) end
elseif inFlight > 0 then
  local earliest = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  waitMs = math.max(1, math.ceil(tonumber(earliest[2]) - now))
else
  waitMs = 1
end

return { ok, inFlight, waitMs }

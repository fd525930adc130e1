--[[
  Token bucket: take `cost` tokens from one scope's bucket if it has them.

  The bucket is a hash { tokens, ts }: the tokens it held at `ts` (Redis time, ms, fractional).
  Refill is continuous: tokens = min(capacity, tokens + elapsed * refillPerMs). A bucket without
  a hash is full, so idle buckets expire (PEXPIRE) instead of accumulating.
  Time comes from Redis TIME, never from a client, so every process shares one clock.
  The scopes index names every bucket that still has a hash, with when it lapses: the limiter page
  reads the buckets from it, at the cost of the buckets listed, never a SCAN of the keyspace.

    Input:
      KEYS[1] bucket hash key (one scope; hash-tagged, so one cluster slot)
      KEYS[2] the scopes index: a sorted set of scope -> when its bucket lapses (Redis time, ms);
              lapsed scopes are dropped when a new one comes, and the set expires with its
              longest-lived bucket

      ARGV[1] capacity: tokens a full bucket holds (> 0)
      ARGV[2] refillPerMs: tokens added per millisecond (> 0, fractional)
      ARGV[3] cost: tokens to take (0 < cost <= capacity)
      ARGV[4] ttlMs: PEXPIRE of the hash after this call (>= the time a bucket needs to refill)
      ARGV[5] scope: the bucket's name in the scopes index

    Output: { acquired, waitMs }
      acquired  1 when `cost` tokens were taken, else 0 (nothing written but the refill)
      waitMs    0 when acquired, else whole ms (rounded up) until `cost` tokens are available
]]
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local refillPerMs = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local ttlMs = tonumber(ARGV[4])

local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local tokens = capacity
local state = redis.call("HMGET", key, "tokens", "ts")
if state[1] and state[2] then
  local elapsed = math.max(0, now - tonumber(state[2]))
  tokens = math.min(capacity, tonumber(state[1]) + elapsed * refillPerMs)
end

local acquired = 0
local waitMs = 0
if tokens >= cost then
  tokens = tokens - cost
  acquired = 1
else
  waitMs = math.ceil((cost - tokens) / refillPerMs)
end

-- %.3f keeps the microseconds of a 13-digit millisecond time (tostring would keep 14 digits).
redis.call("HSET", key, "tokens", string.format("%.6f", tokens), "ts", string.format("%.3f", now))
redis.call("PEXPIRE", key, ttlMs)

-- The index outlives every bucket in it: its expiry only ever grows, to this bucket's. Lapsed scopes
-- are dropped when a scope new to the index comes (the reader skips them meanwhile).
local index = KEYS[2]
if redis.call("ZADD", index, now + ttlMs, ARGV[5]) == 1 then
  redis.call("ZREMRANGEBYSCORE", index, "-inf", now)
end
if redis.call("PTTL", index) < ttlMs then redis.call("PEXPIRE", index, ttlMs) end

return { acquired, waitMs }

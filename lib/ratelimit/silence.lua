-- Silence detection of one outside service, shared by every process (lib/ratelimit/silence.ts).
-- KEYS[1]  calls in flight: sorted set, member = call id, score = when it was sent (ms)
-- KEYS[2]  their leases: sorted set, member = call id, score = lease end (ms); a crashed process's
--          calls stop being renewed and are pruned when their lease runs out
-- KEYS[3]  the service's answers: hash, lastAnswer (ms), lastAnsweredSent (ms: the latest send time
--          of any call that was answered — the service was alive for calls sent until then)
-- KEYS[4]  latencies of recent answered calls: list of ms, newest first
-- KEYS[5]  the service's breaker hash (read only: its state)
-- ARGV[1]  mode: start | finish | renew | check
--   start   ARGV[2] call id, ARGV[3] lease (ms)
--   finish  ARGV[2] call id, ARGV[3] 1 when the service answered (any HTTP status), else 0,
--           ARGV[4] latencies kept, ARGV[5] 1 when the call was a half-open breaker's probe,
--           ARGV[6] floor (ms), ARGV[7] default threshold (ms), ARGV[8] samples needed to measure
--   renew   ARGV[2] lease (ms), ARGV[3..] call ids
--   check   ARGV[2] floor (ms), ARGV[3] default threshold (ms), ARGV[4] samples needed to measure,
--           ARGV[5] calls past 2x the threshold at once that are silence even with answers,
--           ARGV[6] maximum age of an entry (ms), ARGV[7] calls waiting past the threshold needed
--           while the breaker is closed (a half-open probe alone is enough), ARGV[8] the most a
--           probe's patience grows to, in thresholds, ARGV[9] thresholds a lone ignored call (the
--           only one sent since the last answer) must wait to be silence on its own (0: never)
-- Returns:
--   start, finish, renew: now (ms)
--   check: { verdict ('silent' | 'ok'), inFlight, waiting (ignored calls past the threshold), quietMs
--           (how long the oldest ignored call has waited), since (ms: when it was sent — when the
--           silence began), thresholdMs, measured (1 when from latencies), breakerState,
--           answeredSent (ms: the latest send time of a call the service answered), answeredAt (ms:
--           when it last answered any call; 0 when never), patienceMs (how long a probe sent now
--           may wait: the threshold, doubled for each probe of this outage that hung, capped) }
--   A probe answered after more than the threshold shows a service that is slow, not silent: the
--   threshold is then at least twice that answer's latency (KEYS[3] stretchMs) until the
--   samples needed to measure have been answered since (stretchLeft) and the p99 speaks for it.
--   An ignored call is one sent after every call the service answered: a slow call while later
--   calls are answered is the service's long tail, not its silence.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local inflight, leases, answers, latencies, breaker = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode = ARGV[1]

-- The service's normal slowest answer: the p99 of its recent answered calls once there are enough
-- (else the default), raised by a slow probe's answer while that is recent; never under the floor.
local function thresholdOf(floorMs, defaultMs, samplesNeeded)
  local threshold = defaultMs
  local measured = 0
  local samples = redis.call('LRANGE', latencies, 0, -1)
  if #samples >= samplesNeeded then
    local values = {}
    for i, v in ipairs(samples) do values[i] = tonumber(v) end
    table.sort(values)
    threshold = values[math.max(1, math.ceil(#values * 0.99))]
    measured = 1
  end
  local stretch = tonumber(redis.call('HGET', answers, 'stretchMs') or '0')
  if stretch > threshold then threshold = stretch end
  if threshold < floorMs then threshold = floorMs end
  return threshold, measured
end

if mode == 'start' then
  redis.call('ZADD', inflight, now, ARGV[2])
  redis.call('ZADD', leases, now + tonumber(ARGV[3]), ARGV[2])
  return now
end

if mode == 'finish' then
  local sent = redis.call('ZSCORE', inflight, ARGV[2])
  redis.call('ZREM', inflight, ARGV[2])
  redis.call('ZREM', leases, ARGV[2])
  if ARGV[3] == '1' then
    redis.call('HSET', answers, 'lastAnswer', now)
    local left = redis.call('HGET', answers, 'stretchLeft')
    if left and tonumber(left) <= 1 then redis.call('HDEL', answers, 'stretchMs', 'stretchLeft')
    elseif left then redis.call('HINCRBY', answers, 'stretchLeft', -1) end
    if sent and ARGV[5] == '1' then
      local threshold = thresholdOf(tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))
      if now - tonumber(sent) > threshold then
        redis.call('HSET', answers, 'stretchMs', 2 * (now - tonumber(sent)), 'stretchLeft', tonumber(ARGV[8]))
      end
    end
    if sent then
      local latest = tonumber(redis.call('HGET', answers, 'lastAnsweredSent') or '0')
      if tonumber(sent) > latest then redis.call('HSET', answers, 'lastAnsweredSent', sent) end
      redis.call('LPUSH', latencies, now - tonumber(sent))
      redis.call('LTRIM', latencies, 0, tonumber(ARGV[4]) - 1)
    end
    -- A day without answers (a service no longer called, a test run long gone) forgets what it
    -- measured: the next run starts from the stated default, never from another run's latencies.
    redis.call('PEXPIRE', answers, 86400000)
    redis.call('PEXPIRE', latencies, 86400000)
  end
  return now
end

if mode == 'renew' then
  local until_ = now + tonumber(ARGV[2])
  for i = 3, #ARGV do redis.call('ZADD', leases, 'XX', until_, ARGV[i]) end
  return now
end

-- check
local floorMs = tonumber(ARGV[2])
local defaultMs = tonumber(ARGV[3])
local samplesNeeded = tonumber(ARGV[4])
local several = tonumber(ARGV[5])
local maxAgeMs = tonumber(ARGV[6])
local needWaiting = tonumber(ARGV[7])

-- Prune calls whose process stopped renewing them, and any entry past the maximum age.
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
for _, id in ipairs(expired) do redis.call('ZREM', inflight, id) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
local ancient = redis.call('ZRANGEBYSCORE', inflight, '-inf', now - maxAgeMs)
for _, id in ipairs(ancient) do
  redis.call('ZREM', inflight, id)
  redis.call('ZREM', leases, id)
end

local threshold, measured = thresholdOf(floorMs, defaultMs, samplesNeeded)

local b = redis.call('HMGET', breaker, 'state', 'hung')
local state = b[1] or 'closed'
local patience = threshold * math.min(tonumber(ARGV[8]), 2 ^ tonumber(b[2] or '0'))
-- Half-open, the probe alone is judged, by its patience.
local judgedMs = threshold
if state == 'half_open' then judgedMs = patience end
local inFlight = redis.call('ZCARD', inflight)
local answeredSent = tonumber(redis.call('HGET', answers, 'lastAnsweredSent') or '0')
local answeredAt = tonumber(redis.call('HGET', answers, 'lastAnswer') or '0')
local ignoredFrom = '(' .. answeredSent
local waiting = 0
if now - judgedMs > answeredSent then waiting = redis.call('ZCOUNT', inflight, ignoredFrom, now - judgedMs) end
local longWaiting = redis.call('ZCOUNT', inflight, '-inf', now - 2 * judgedMs)
local oldest = redis.call('ZRANGEBYSCORE', inflight, ignoredFrom, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local since = now
if oldest[2] then since = tonumber(oldest[2]) end
local quietMs = now - since

local need = needWaiting
if state == 'half_open' then need = 1 end
-- A service called one request at a time (one document after another) never has two ignored
-- calls at once: its only call, ignored for several thresholds, speaks for it.
local ignored = redis.call('ZCOUNT', inflight, ignoredFrom, '+inf')
local loneAfter = tonumber(ARGV[9])
local lone = loneAfter > 0 and ignored == 1 and quietMs > loneAfter * judgedMs
local silent = (waiting >= need) or lone
  or (longWaiting >= several and 2 * longWaiting >= inFlight)
return { silent and 'silent' or 'ok', inFlight, waiting, quietMs, since, threshold, measured, state, answeredSent, answeredAt, patience }

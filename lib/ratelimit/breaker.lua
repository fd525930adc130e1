-- The circuit breaker of one outside service, shared by every process (lib/ratelimit/breaker.ts).
-- KEYS[1]  the service's hash: state (closed | open | misconfigured | half_open), failures,
--          windowStart, since, until (open, misconfigured: the half-open time; half_open: the
--          probe's lease end), error, prober, hung (probes of this outage that hung unanswered)
-- ARGV[1]  mode: admit | success | failure | silent | misconfigured
--          silent: the service stopped answering (lib/ratelimit/silence.ts): open now, whatever
--          the streak; misconfigured: it refused our key, URL or model: misconfigured now
-- ARGV[2]  failures in a row (within the window) that open the breaker
-- ARGV[3]  window of that streak (ms)
-- ARGV[4]  cool-down before the half-open probe (ms)
-- ARGV[5]  the probe's lease (ms): a probe that never reports back is replaced after it
-- ARGV[6]  the failure's description (failure mode)
-- ARGV[7]  the caller's id (a probe's success or failure is recognised by it)
-- ARGV[8]  (silent) when the silence began, ms: the outage's "since"
-- Returns { decision, state, transition, waitMs, since, error }:
--   decision (admit): go | probe | wait; transition: '' or the state just entered.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k = KEYS[1]
local mode = ARGV[1]
local threshold = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[3])
local cooldownMs = tonumber(ARGV[4])
local probeMs = tonumber(ARGV[5])
local h = redis.call('HMGET', k, 'state', 'failures', 'windowStart', 'since', 'until', 'error')
local state = h[1] or 'closed'
local failures = tonumber(h[2] or '0')
local windowStart = tonumber(h[3] or '0')
local since = tonumber(h[4] or '0')
local untilAt = tonumber(h[5] or '0')
local lastError = h[6] or ''

if mode == 'admit' then
  if state == 'closed' then return { 'go', state, '', 0, 0, '' } end
  if now < untilAt then return { 'wait', state, '', untilAt - now, since, lastError } end
  -- Cool-down over (open, misconfigured), or the probe's lease ran out (half_open): this caller is the probe.
  local transition = ''
  if state == 'open' or state == 'misconfigured' then transition = 'half_open' end
  redis.call('HSET', k, 'state', 'half_open', 'until', now + probeMs, 'prober', ARGV[7])
  return { 'probe', 'half_open', transition, 0, since, lastError }
end

if mode == 'success' then
  -- The service answered: a streak is broken, an outage is over.
  if state == 'closed' then
    if failures > 0 then redis.call('HSET', k, 'failures', 0, 'windowStart', 0) end
    return { '', state, '', 0, 0, '' }
  end
  redis.call('DEL', k)
  return { '', 'closed', 'closed', 0, since, lastError }
end

if mode == 'silent' then
  -- Open (or open again after a probe that hung). An open or misconfigured breaker stays as it is.
  if state == 'open' or state == 'misconfigured' then return { '', state, '', math.max(0, untilAt - now), since, lastError } end
  local began = tonumber(ARGV[8] or '0')
  if state == 'half_open' or began <= 0 or began > now then began = (state == 'half_open') and since or now end
  -- A probe that hung: the next one may wait longer (lib/ratelimit/silence.lua, patience).
  if state == 'half_open' then redis.call('HINCRBY', k, 'hung', 1) end
  redis.call('HSET', k, 'state', 'open', 'since', began, 'until', now + cooldownMs, 'error', ARGV[6], 'prober', '')
  return { '', 'open', 'open', cooldownMs, began, ARGV[6] }
end

if mode == 'misconfigured' then
  if state == 'misconfigured' then return { '', state, '', math.max(0, untilAt - now), since, lastError } end
  local began = now
  if state ~= 'closed' and since > 0 then began = since end
  redis.call('HSET', k, 'state', 'misconfigured', 'since', began, 'until', now + cooldownMs, 'error', ARGV[6], 'prober', '')
  return { '', 'misconfigured', 'misconfigured', cooldownMs, began, ARGV[6] }
end

-- failure
if state == 'closed' then
  if windowStart == 0 or now - windowStart > windowMs then
    failures = 0
    windowStart = now
  end
  failures = failures + 1
  if failures >= threshold then
    redis.call('HSET', k, 'state', 'open', 'failures', failures, 'windowStart', windowStart, 'since', now, 'until', now + cooldownMs, 'error', ARGV[6], 'prober', '')
    return { '', 'open', 'open', cooldownMs, now, ARGV[6] }
  end
  redis.call('HSET', k, 'failures', failures, 'windowStart', windowStart)
  return { '', 'closed', '', 0, 0, '' }
end
if state == 'half_open' then
  -- The probe (or a call that went out before the breaker opened) failed: open again.
  redis.call('HSET', k, 'state', 'open', 'until', now + cooldownMs, 'error', ARGV[6], 'prober', '')
  return { '', 'open', 'open', cooldownMs, since, ARGV[6] }
end
-- Already open (or misconfigured): a call that went out before it opened failed too.
return { '', state, '', math.max(0, untilAt - now), since, lastError }

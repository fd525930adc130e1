--[[
  Provider tokens: a provider's tokens per minute, shared by every process — reserved before a
  call, settled from the answer's `usage` after, learnt from the answers' rate-limit headers when
  not configured, and paused for everyone by a 429.

  One hash per provider. Per budget b ("tokens": prompt + completion; "input" and "output" apart,
  for a provider that limits them apart), fields:
    b:limit      tokens per minute in force (configured, else learnt from headers)
    b:source     "configured" or "headers"
    b:level      tokens in the bucket at b:ts (may go below zero: an answer longer than reserved)
    b:ts         Redis time (ms) of b:level
    b:announced, b:remaining, b:resetAt, b:learntAt   the provider's last word (limit, remaining,
                 when it is whole again, when it said so)
  and: pausedUntil / pauseReason (a 429 asked everyone to stay away until then), probes and
  probeUntil (while no limit is known, a few calls at a time ask the provider: how many are out,
  and their lease), announced = "none" (answers
  carry no limit: nothing to keep), completion:<shape> (the mean completion tokens of a call of that
  shape, an exponential moving average; the estimate of the next one).

  A bucket holds one minute's worth (limit) and refills continuously at limit per minute: what
  OpenAI's token limit does. Time comes from Redis TIME, so every process shares one clock.

  Deadlines first, as for the slots (provider-slots.lua): a call close to its job's deadline that
  is refused for tokens waits in a sorted set by deadline; while it waits, no call with a later
  deadline, or none, takes tokens, so the tokens that come back go to the call with the least time
  left. A waiter that stops asking (its call ended) drops out after ARGV[15].

    KEYS[1] the provider's hash
    KEYS[2] urgent waiters for tokens, by deadline (the same hash tag; see "Deadlines first")
    KEYS[3] urgent waiters for tokens, by when they stop counting as waiting (the same hash tag)

    ARGV[1] mode
    ARGV[2] minuteMs: a minute in real ms (time-scaled)
    ARGV[3..5] configured limits of tokens, input, output (0 = not configured)

    reserve: ARGV[6] input tokens (the prompt, counted), ARGV[7] largest output (max tokens; 0 =
             none given), ARGV[8] output estimate before any history, ARGV[9] shape, ARGV[10]
             probe lease ms, ARGV[11] poll ms, ARGV[12] calls that may ask at once while no limit is known,
             ARGV[13] the call's id, ARGV[14] its job's deadline (ms since the epoch) when the call
             is urgent, else "", ARGV[15] how long a refused urgent call counts as waiting (ms)
             → { ok, waitMs, reason, outputEstimate }, reason one of "reserved", "unlimited",
               "probe" (ok: this call asks first), "paused", "tokens", "probing" (other calls are
               asking first), "urgent" (an urgent call with an earlier deadline waits for
               tokens). Takes input + estimate from "tokens", input from "input", the estimate
               from "output"; a need larger than a whole minute is capped to it (the bucket must
               be full), so a big call is never refused for ever.
    settle:  ARGV[6] input reserved, ARGV[7] output reserved, ARGV[8] input used, ARGV[9] output
             used (-1: not known: the output is given back, the input kept; -2: nothing was
             used — never sent, or refused with a 429 — everything is given back and the answer
             history is left alone), ARGV[10] shape, ARGV[11] 1 when the call held the probe → { 1 }
    learn:   ARGV[6] 1 when the answer announced any limit, then per budget (tokens, input,
             output) limit, remaining, resetMs (-1 when not announced), then ARGV[16] 1 when
             the call succeeded → { 1 }. A limit announced and not configured becomes the limit;
             the bucket never holds more than the provider says remain (what this side reserved for
             calls still answering is not in the provider's count yet, so ours may hold less).
    pause:   ARGV[6] ms, ARGV[7] reason → { pausedUntilMs }
]]
local k = KEYS[1]
local mode = ARGV[1]
local minuteMs = tonumber(ARGV[2])
local budgets = { "tokens", "input", "output" }
local configured = { tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]) }
-- Learnt limits and the completion history outlive a quiet day, not a quiet week.
local KEEP_MS = 7 * 24 * 3600 * 1000

local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local function num(field)
  local v = redis.call("HGET", k, field)
  if v then return tonumber(v) end
  return nil
end

-- The limit in force for budget i, writing where it came from; nil when none is known.
local function limitOf(i)
  local b = budgets[i]
  if configured[i] > 0 then
    if redis.call("HGET", k, b .. ":source") ~= "configured" or num(b .. ":limit") ~= configured[i] then
      redis.call("HSET", k, b .. ":limit", configured[i], b .. ":source", "configured")
    end
    return configured[i]
  end
  if redis.call("HGET", k, b .. ":source") == "configured" then
    -- No longer configured: forget it, the headers will say.
    redis.call("HDEL", k, b .. ":limit", b .. ":source", b .. ":level", b .. ":ts")
    return nil
  end
  return num(b .. ":limit")
end

-- Budget i's tokens now, refilled since they were written.
local function levelOf(i, limit)
  local b = budgets[i]
  local level = num(b .. ":level")
  local ts = num(b .. ":ts")
  if level == nil or ts == nil then return limit end
  return math.min(limit, level + math.max(0, now - ts) * limit / minuteMs)
end

local function setLevel(i, level)
  redis.call("HSET", k, budgets[i] .. ":level", string.format("%.3f", level), budgets[i] .. ":ts", string.format("%.3f", now))
end

local result
if mode == "reserve" then
  local input = tonumber(ARGV[6])
  local maxOutput = tonumber(ARGV[7])
  local shape = ARGV[9]
  local probeLeaseMs = tonumber(ARGV[10])
  local pollMs = tonumber(ARGV[11])
  local maxProbes = tonumber(ARGV[12])
  local history = num("completion:" .. shape)
  local output = tonumber(ARGV[8])
  -- A quarter over the mean: most answers fit what was reserved, and the rest is settled after.
  if history then output = math.ceil(history * 1.25) end
  if maxOutput > 0 then output = math.min(output, maxOutput) end
  local needs = { input + output, input, output }

  local pausedUntil = num("pausedUntil")
  if pausedUntil and pausedUntil > now then
    return { 0, math.ceil(pausedUntil - now), "paused", output }
  end
  local limits = {}
  local any = false
  for i = 1, 3 do
    limits[i] = limitOf(i)
    if limits[i] then any = true end
  end
  if not any then
    if redis.call("HGET", k, "announced") == "none" then return { 1, 0, "unlimited", output } end
    local probe = num("probeUntil")
    local probes = 0
    -- Probes whose lease ran out (their process died) no longer count.
    if probe and probe > now then probes = num("probes") or 0 end
    if probes >= maxProbes then return { 0, math.max(1, math.ceil(math.min(probe - now, pollMs))), "probing", output } end
    redis.call("HSET", k, "probes", probes + 1, "probeUntil", string.format("%.3f", now + probeLeaseMs))
    redis.call("PEXPIRE", k, KEEP_MS)
    return { 1, 0, "probe", output }
  end
  local caller = ARGV[13]
  local deadline = tonumber(ARGV[14])
  local waiterTtlMs = tonumber(ARGV[15])
  local urgentKey, urgentSeenKey = KEYS[2], KEYS[3]
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", urgentSeenKey, "-inf", string.format("(%.3f", now))) do
    redis.call("ZREM", urgentKey, id)
    redis.call("ZREM", urgentSeenKey, id)
  end
  local function waitAsUrgent()
    if deadline then
      redis.call("ZADD", urgentKey, deadline, caller)
      redis.call("ZADD", urgentSeenKey, string.format("%.3f", now + waiterTtlMs), caller)
      -- The sets outlive their latest waiter, no more.
      for _, uk in ipairs({ urgentKey, urgentSeenKey }) do redis.call("PEXPIRE", uk, math.ceil(waiterTtlMs)) end
    end
  end
  local first = redis.call("ZRANGE", urgentKey, 0, 1, "WITHSCORES")
  for j = 1, #first, 2 do
    if first[j] ~= caller then
      if deadline == nil or tonumber(first[j + 1]) < deadline then
        waitAsUrgent()
        return { 0, math.max(1, pollMs), "urgent", output }
      end
      break
    end
  end
  local waitMs = 0
  local levels = {}
  for i = 1, 3 do
    if limits[i] then
      levels[i] = levelOf(i, limits[i])
      local need = math.min(needs[i], limits[i])
      if levels[i] < need then waitMs = math.max(waitMs, (need - levels[i]) * minuteMs / limits[i]) end
    end
  end
  if waitMs > 0 then
    waitAsUrgent()
    return { 0, math.max(1, math.ceil(waitMs)), "tokens", output }
  end
  redis.call("ZREM", urgentKey, caller)
  redis.call("ZREM", urgentSeenKey, caller)
  for i = 1, 3 do
    if limits[i] then setLevel(i, levels[i] - needs[i]) end
  end
  redis.call("PEXPIRE", k, KEEP_MS)
  result = { 1, 0, "reserved", output }
elseif mode == "settle" then
  local inputReserved, outputReserved = tonumber(ARGV[6]), tonumber(ARGV[7])
  local inputUsed, outputUsed = tonumber(ARGV[8]), tonumber(ARGV[9])
  if outputUsed == -2 then
    inputUsed = 0
    outputUsed = 0
  elseif outputUsed < 0 then
    inputUsed = inputReserved
    outputUsed = 0
  else
    local shape = ARGV[10]
    local history = num("completion:" .. shape)
    local mean = outputUsed
    if history then mean = history * 0.8 + outputUsed * 0.2 end
    redis.call("HSET", k, "completion:" .. shape, string.format("%.3f", mean))
  end
  local deltas = { (inputUsed + outputUsed) - (inputReserved + outputReserved), inputUsed - inputReserved, outputUsed - outputReserved }
  for i = 1, 3 do
    local limit = limitOf(i)
    if limit and deltas[i] ~= 0 then setLevel(i, math.min(limit, levelOf(i, limit) - deltas[i])) end
  end
  if ARGV[11] == "1" then
    local probes = (num("probes") or 1) - 1
    if probes > 0 then redis.call("HSET", k, "probes", probes) else redis.call("HDEL", k, "probes", "probeUntil") end
  end
  redis.call("PEXPIRE", k, KEEP_MS)
  result = { 1 }
elseif mode == "learn" then
  local announcedAny = ARGV[6] == "1"
  for i = 1, 3 do
    local b = budgets[i]
    local limit, remaining, resetMs = tonumber(ARGV[4 + 3 * i]), tonumber(ARGV[5 + 3 * i]), tonumber(ARGV[6 + 3 * i])
    if resetMs >= 0 then
      redis.call("HSET", k, b .. ":announced", limit, b .. ":remaining", remaining, b .. ":resetAt", string.format("%.3f", now + resetMs), b .. ":learntAt", string.format("%.3f", now))
      if configured[i] <= 0 then
        local known = limitOf(i)
        if known == nil then
          redis.call("HSET", k, b .. ":limit", limit, b .. ":source", "headers")
          setLevel(i, remaining)
        else
          local level = levelOf(i, known)
          if known ~= limit then redis.call("HSET", k, b .. ":limit", limit, b .. ":source", "headers") end
          setLevel(i, math.min(level, remaining, limit))
        end
      else
        local level = levelOf(i, configured[i])
        setLevel(i, math.min(level, remaining))
      end
    end
  end
  if announcedAny then
    redis.call("HDEL", k, "announced")
  elseif ARGV[16] == "1" then
    redis.call("HSET", k, "announced", "none")
  end
  redis.call("HDEL", k, "probes", "probeUntil")
  redis.call("PEXPIRE", k, KEEP_MS)
  result = { 1 }
elseif mode == "pause" then
  local untilMs = math.max(num("pausedUntil") or 0, now + tonumber(ARGV[6]))
  redis.call("HSET", k, "pausedUntil", string.format("%.3f", untilMs), "pauseReason", ARGV[7])
  redis.call("PEXPIRE", k, KEEP_MS)
  result = { math.floor(untilMs) }
else
  return redis.error_reply("unknown mode " .. tostring(mode))
end
return result

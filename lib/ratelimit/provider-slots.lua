--[[
  Provider slots: a counting semaphore of `limit` calls in flight, shared by every process, with a
  fair share per tenant.

  The holders are a sorted set: member = holder id (one per call, "<tenant>|<process>:<uuid>"),
  score = the holder's lease expiry (Redis time, ms). Every call first drops the holders whose
  lease has expired, so a slot held by a crashed worker (never released) comes back once its lease
  runs out; a live holder renews its lease while its call runs. Release is a plain ZREM of the
  holder. Time comes from Redis TIME, never from a client, so every process shares one clock.

  Fair share: waiters poll, and without a rule whoever asks first after a release takes the slot,
  so a tenant with 64 waiting calls wins 64 times in 67 against a tenant with 3. The waiting
  tenants are a second sorted set: member = tenant, score = when it stops counting as waiting
  (now + waiterTtlMs, refreshed by every refused ask; a tenant whose calls stopped asking drops out
  by itself). A free slot goes to the asking tenant when it holds fewer than its share,
    share = ceil(limit / active tenants), active = tenants holding ∪ tenants waiting ∪ the asker,
  or when no other tenant is waiting (a slot is never left idle for a tenant that does not want
  it). Otherwise the ask is refused and the asker is recorded as waiting. So a tenant holding
  every slot hands the next freed ones to a waiting small tenant, and two busy tenants converge to
  an equal split.

  Deadlines first: a call whose job is close to its deadline (the caller says so by passing the
  deadline; see URGENT_WITHIN_MS in provider.ts) is urgent. The urgent waiters are a third sorted
  set: member = holder, score = its job's deadline (ms); a fourth one says until when each counts
  as waiting (refreshed by every refused ask, like the tenants'). A free slot goes to no one while
  an urgent call with an earlier deadline than the asker's waits (every urgent call is ahead of
  every call that is not), and an urgent asker with none ahead takes it whatever its tenant's
  share: the call with the least time left goes first, tenant fairness aside.

    Input:
      KEYS[1] holders sorted set (one provider; hash-tagged, so one cluster slot)
      KEYS[2] waiting tenants sorted set (the same provider and hash tag)
      KEYS[3] urgent waiters sorted set, by deadline (the same hash tag)
      KEYS[4] urgent waiters sorted set, by when they stop counting as waiting (the same hash tag)

      ARGV[1] mode: "acquire" (take a slot if one is free and this tenant's turn), "spare" (take
              a slot only if one is free and no tenant waits: a slot that would otherwise sit
              idle; a refusal is not recorded as waiting) or "renew" (extend a held lease)
      ARGV[2] holder id (unique per call; the tenant is the part before the first "|", the whole
              id counting as tenant "" when there is none)
      ARGV[3] limit: calls in flight at once (>= 1)
      ARGV[4] leaseMs: how long a slot stays held without a renewal (> 0)
      ARGV[5] waiterTtlMs: how long a refused tenant counts as waiting without asking again (> 0)
      ARGV[6] deadline: the urgent call's job deadline (ms since the epoch), or "" for a call
              that is not urgent

    Output: { ok, inFlight, waitMs }
      acquire: ok 1 when the holder now holds a slot (or already held one: lease extended),
               0 when all `limit` slots are held, or a slot is free but an urgent call with an
               earlier deadline waits, or other tenants wait and this one (not urgent) holds its
               share already (nothing written but the expired entries dropped and this tenant,
               and an urgent call, recorded as waiting)
      spare:   ok 1 when the holder now holds a slot, 0 when none is free or any tenant waits
               (nothing written but the expired entries dropped)
      renew:   ok 1 when the lease was extended, 0 when the holder no longer holds a slot (its
               lease expired and it was dropped: it must not come back in over the limit)
      inFlight holders after the call
      waitMs   0 when ok; when all slots are held, whole ms (rounded up) until the earliest lease
               expires: the longest a slot can stay taken unless its holder renews it; when refused
               for the fair share, waiterTtlMs: ask again before then to keep the tenant's place
]]
local holdersKey = KEYS[1]
local waitersKey = KEYS[2]
local urgentKey = KEYS[3]
local urgentSeenKey = KEYS[4]
local mode = ARGV[1]
local holder = ARGV[2]
local limit = tonumber(ARGV[3])
local leaseMs = tonumber(ARGV[4])
local waiterTtlMs = tonumber(ARGV[5])
local deadline = tonumber(ARGV[6])

local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local expiry = string.format("%.3f", now + leaseMs)

-- Expired leases and waiters first: a crashed holder's slot is free again from here on, and a
-- tenant whose calls stopped asking no longer holds anyone back.
redis.call("ZREMRANGEBYSCORE", holdersKey, "-inf", string.format("(%.3f", now))
redis.call("ZREMRANGEBYSCORE", waitersKey, "-inf", string.format("(%.3f", now))
local gone = redis.call("ZRANGEBYSCORE", urgentSeenKey, "-inf", string.format("(%.3f", now))
for _, id in ipairs(gone) do
  redis.call("ZREM", urgentKey, id)
  redis.call("ZREM", urgentSeenKey, id)
end

local function tenantOf(id)
  local bar = string.find(id, "|", 1, true)
  if bar then return string.sub(id, 1, bar - 1) end
  return ""
end

local tenant = tenantOf(holder)

-- Whether a free slot is this tenant's to take: below its share, or nobody else is waiting.
local function isMyTurn()
  local active = { [tenant] = true }
  local activeCount = 1
  local mine = 0
  for _, id in ipairs(redis.call("ZRANGE", holdersKey, 0, -1)) do
    local t = tenantOf(id)
    if t == tenant then mine = mine + 1 end
    if not active[t] then
      active[t] = true
      activeCount = activeCount + 1
    end
  end
  local othersWaiting = false
  for _, t in ipairs(redis.call("ZRANGE", waitersKey, 0, -1)) do
    if t ~= tenant then othersWaiting = true end
    if not active[t] then
      active[t] = true
      activeCount = activeCount + 1
    end
  end
  return (not othersWaiting) or mine < math.ceil(limit / activeCount)
end

-- Whether an urgent call other than this one waits with an earlier deadline (any urgent call is
-- ahead of one that is not urgent). The set is sorted by deadline: the first other one decides.
local function urgentAhead()
  local first = redis.call("ZRANGE", urgentKey, 0, 1, "WITHSCORES")
  for i = 1, #first, 2 do
    if first[i] ~= holder then return (not deadline) or tonumber(first[i + 1]) < deadline end
  end
  return false
end

local function forgetUrgent()
  redis.call("ZREM", urgentKey, holder)
  redis.call("ZREM", urgentSeenKey, holder)
end

local held = redis.call("ZSCORE", holdersKey, holder)
local ok = 0
local slotFree = false
if held then
  redis.call("ZADD", holdersKey, expiry, holder)
  ok = 1
elseif mode == "acquire" then
  slotFree = redis.call("ZCARD", holdersKey) < limit
  if slotFree and not urgentAhead() and (deadline or isMyTurn()) then
    redis.call("ZADD", holdersKey, expiry, holder)
    if deadline then forgetUrgent() end
    ok = 1
  else
    -- Refused: this tenant waits, and counts for the share until it stops asking.
    local waitingUntil = string.format("%.3f", now + waiterTtlMs)
    redis.call("ZADD", waitersKey, waitingUntil, tenant)
    if deadline then
      redis.call("ZADD", urgentKey, deadline, holder)
      redis.call("ZADD", urgentSeenKey, waitingUntil, holder)
    end
    -- The sets outlive their latest waiter, no more.
    for _, k in ipairs({ waitersKey, urgentKey, urgentSeenKey }) do
      if redis.call("EXISTS", k) == 1 and redis.call("PTTL", k) < waiterTtlMs then redis.call("PEXPIRE", k, math.ceil(waiterTtlMs)) end
    end
  end
elseif mode == "spare" then
  if redis.call("ZCARD", holdersKey) < limit and redis.call("ZCARD", waitersKey) == 0 then
    redis.call("ZADD", holdersKey, expiry, holder)
    ok = 1
  end
end

local inFlight = redis.call("ZCARD", holdersKey)
local waitMs = 0
if ok == 1 then
  -- The set outlives its longest lease, no more: an idle provider leaves no key behind.
  if redis.call("PTTL", holdersKey) < leaseMs then redis.call("PEXPIRE", holdersKey, math.ceil(leaseMs)) end
elseif slotFree then
  waitMs = math.max(1, math.ceil(waiterTtlMs))
elseif inFlight > 0 then
  local earliest = redis.call("ZRANGE", holdersKey, 0, 0, "WITHSCORES")
  waitMs = math.max(1, math.ceil(tonumber(earliest[2]) - now))
else
  waitMs = 1
end

return { ok, inFlight, waitMs }

import { randomBytes } from "node:crypto";
import { env } from "@/lib/env";
import { ApiError } from "./errors";
import { key, redis } from "@/lib/redis/client";

/** The window of BOUNDED_UPLOADS_PER_MINUTE. A security setting: not scaled by BOUNDED_TIME_SCALE. */
const RATE_WINDOW_S = 60;
/**
 * How long an upload's slot is held without a sign of life from the process serving it. A live
 * upload renews its lease every `renewMs`, however long its body takes to arrive; the slot of one
 * whose process died (a web restart mid-upload) is free again within this time, not for minutes
 * of refused uploads.
 */
export const UPLOAD_LEASE = { ms: 30_000, renewMs: 10_000 } as const;
/** What a caller refused for uploads in flight is told to wait: one upload's usual time. */
const BUSY_RETRY_S = 5;

/**
 * One step, so parallel uploads cannot all pass the check before any of them is counted:
 * expired leases go, then the caller's uploads in flight (count and declared bytes) are checked,
 * then this minute's count is taken, then the lease is added. Members are "<id>:<bytes>",
 * scored by when their lease ends. Returns {0, 0} when admitted, {1, retryS} for too many at
 * once or too many bytes, {2, retryS} for too many this minute.
 */
const ACQUIRE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local leases = redis.call('ZRANGE', KEYS[1], 0, -1)
local bytes = tonumber(ARGV[5])
local inflight = 0
for _, m in ipairs(leases) do inflight = inflight + tonumber(string.match(m, ':(%d+)$')) end
if #leases >= tonumber(ARGV[2]) or (#leases > 0 and inflight + bytes > tonumber(ARGV[3])) then
  return {1, tonumber(ARGV[8])}
end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('EXPIRE', KEYS[2], ARGV[4]) end
if n > tonumber(ARGV[6]) then
  return {2, math.max(redis.call('TTL', KEYS[2]), 1)}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[7]), ARGV[9] .. ':' .. bytes)
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return {0, 0}
`;

/**
 * What one caller may upload: uploads started per minute, and uploads and declared bytes in flight
 * at once. Not a file's own limits (size, rows: `UploadLimits` in lib/imports/inspect-upload.ts).
 */
export interface UploadCallerLimits {
  perMinute: number;
  concurrent: number;
  inflightBytes: number;
}

/** The caller limits the environment sets (`BOUNDED_UPLOADS_*`). */
export function uploadCallerLimits(): UploadCallerLimits {
  const e = env();
  return {
    perMinute: e.BOUNDED_UPLOADS_PER_MINUTE,
    concurrent: e.BOUNDED_UPLOADS_CONCURRENT,
    inflightBytes: e.BOUNDED_UPLOADS_INFLIGHT_MB * 1024 * 1024,
  };
}

/**
 * Runs one upload of `caller` ("user:<id>" or "address:<ip>") under the caller's limits: uploads
 * started per minute, and uploads and declared bytes in flight at once. A refusal is a 429 with
 * Retry-After; the slot is given back when `run` settles, whether it answered or threw, and its
 * lease renewed while it runs (`UPLOAD_LEASE`).
 * A single upload larger than the in-flight byte cap still runs alone (its own size limit
 * applies): the cap is on uploads together.
 */
export async function withUploadSlot<T>(
  caller: string,
  declaredBytes: number,
  run: () => Promise<T>,
  limits = uploadCallerLimits(),
  lease: { ms: number; renewMs: number } = UPLOAD_LEASE,
): Promise<T> {
  const inflightKey = key("uploads", "inflight", caller);
  const member = randomBytes(8).toString("hex");
  const bytes = Math.max(0, Math.round(declaredBytes));
  const [verdict, retryS] = (await redis().eval(
    ACQUIRE,
    2,
    inflightKey,
    key("uploads", "rate", caller),
    Date.now(),
    limits.concurrent,
    limits.inflightBytes,
    RATE_WINDOW_S,
    bytes,
    limits.perMinute,
    lease.ms,
    BUSY_RETRY_S,
    member,
  )) as [number, number];
  if (verdict === 1) {
    throw new ApiError(
      429,
      "too_many_uploads_in_flight",
      `You have ${limits.concurrent} upload(s) in progress already (at most ${limits.concurrent} at once, ${Math.round(limits.inflightBytes / 1024 / 1024)} MB together). Wait for one to finish, then try again.`,
      { "Retry-After": String(retryS) },
    );
  }
  if (verdict === 2) {
    throw new ApiError(
      429,
      "too_many_uploads",
      `Too many uploads: at most ${limits.perMinute} a minute. Try again in ${retryS} s.`,
      { "Retry-After": String(retryS) },
    );
  }
  const held = `${member}:${bytes}`;
  const renewal = setInterval(() => {
    // XX: a slot already given back is not taken again. A failed renewal is retried next time.
    redis()
      .multi()
      .zadd(inflightKey, "XX", Date.now() + lease.ms, held)
      .pexpire(inflightKey, lease.ms)
      .exec()
      .catch(() => undefined);
  }, lease.renewMs);
  renewal.unref();
  try {
    return await run();
  } finally {
    clearInterval(renewal);
    await redis().zrem(inflightKey, held);
  }
}

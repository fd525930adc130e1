import { createHash } from "node:crypto";
import { z } from "zod";
import type { LuaScript } from "@/lib/ratelimit/scripts";
import { runLua } from "@/lib/ratelimit/scripts";
import { key, redis, type RedisClient } from "@/lib/redis/client";

/**
 * Which worker processes are alive, and what each consumes. Each process renews its entry every
 * `PRESENCE_MS`; an entry not renewed for `PRESENCE_TTL_MS` (by Redis's clock, so hosts' clocks
 * never matter) is gone. Two keys hold every entry: a sorted set of when each lapses and a hash of
 * what each says. A reader asks them alone, so its cost follows the worker processes, never the
 * keyspace (a SCAN of `workers:*` walked every key Redis holds, on a route a load balancer polls).
 */

/** How often a worker process renews its presence. */
export const PRESENCE_MS = 5_000;
/** An entry not renewed for this long is a process that is gone (three renewals missed). */
export const PRESENCE_TTL_MS = 3 * PRESENCE_MS;

/** What a worker process announces; parsed, because another version may have written it. */
const presenceSchema = z.object({
  host: z.string(),
  pid: z.number().int(),
  queues: z.array(z.string()),
  concurrency: z.number().int().nonnegative(),
  startedAt: z.string().optional(),
});
export type Presence = z.infer<typeof presenceSchema>;

/** The two keys (under the prefix, whose hash tag puts both in one cluster slot). */
export function presenceKeys(): [lapses: string, entries: string] {
  return [key("workers", "lapses"), key("workers", "entries")];
}

function inline(source: string): LuaScript {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/** Redis's clock in ms, and the lapsed entries dropped (ZREM and HDEL) before anything is read or written. */
const NOW_AND_PRUNE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[2], unpack(lapsed))
end`;

/** ARGV: id, the entry's JSON, its lifetime in ms. */
const ANNOUNCE = inline(`${NOW_AND_PRUNE}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`);

const READ = inline(`${NOW_AND_PRUNE}
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))`);

/** Says (again) that process `id` is alive, for `ttlMs` from now by Redis's clock. */
export async function announcePresence(
  client: RedisClient,
  id: string,
  presence: Presence,
  ttlMs = PRESENCE_TTL_MS,
): Promise<void> {
  await runLua(client, ANNOUNCE, presenceKeys(), [id, JSON.stringify(presence), ttlMs]);
}

/** Takes process `id` out at once (a clean stop). */
export async function withdrawPresence(client: RedisClient, id: string): Promise<void> {
  const [lapses, entries] = presenceKeys();
  await client.multi().zrem(lapses, id).hdel(entries, id).exec();
}

/** The worker processes alive now (for /queues, health, readiness and why a job waits). */
export async function livePresences(client: RedisClient = redis()): Promise<Presence[]> {
  const values = await runLua<(string | null)[]>(client, READ, presenceKeys(), []);
  return values.flatMap((v) => {
    if (v === null) return [];
    try {
      const parsed = presenceSchema.safeParse(JSON.parse(v));
      return parsed.success ? [parsed.data] : [];
    } catch {
      return [];
    }
  });
}

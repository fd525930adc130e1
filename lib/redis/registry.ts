import type { RedisClient } from "./client";
import { luaSource, runLua } from "./lua";

/**
 * Entries that lapse unless renewed — "this process is alive, and this is what it says" — kept in
 * two keys under one namespace: a sorted set of when each entry lapses, by Redis's clock (so the
 * hosts' clocks never matter), and a hash of what each says. Reading them costs what the entries
 * are, never the keyspace: a SCAN for `<namespace>:*` walks every key Redis holds, on routes a
 * load balancer polls. Lapsed entries are dropped by whoever touches the registry next, and the
 * keys themselves expire with their longest-lived entry. On a Redis Cluster the namespace starts
 * with the prefix's hash tag, so both keys share one slot.
 */
export interface LapsingRegistry {
  /** The sorted set of lapse times and the hash of entries (tests read them). */
  readonly keys: [lapses: string, entries: string];
  /** Says (again) that `id` is alive, with `value`, for `ttlMs` from now by Redis's clock. */
  renew(client: RedisClient, id: string, value: string, ttlMs: number): Promise<void>;
  /** Takes `id` out at once (a clean stop). */
  remove(client: RedisClient, id: string): Promise<void>;
  /** The live entries' values, in id order. */
  list(client: RedisClient): Promise<{ id: string; value: string }[]>;
}

/** Redis's clock in ms, and the lapsed entries dropped, before anything is read or written. */
const NOW_AND_PRUNE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[2], unpack(lapsed))
end`;

/** ARGV: id, value, lifetime in ms. The keys outlive their longest-lived entry, no more. */
const RENEW = luaSource(`${NOW_AND_PRUNE}
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
end
return 1`);

/** Returns the live ids and their values, side by side. */
const LIST = luaSource(`${NOW_AND_PRUNE}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
if #ids == 0 then return {{}, {}} end
table.sort(ids)
return {ids, redis.call('HMGET', KEYS[2], unpack(ids))}`);

export function lapsingRegistry(namespace: string): LapsingRegistry {
  const keys: [string, string] = [`${namespace}:lapses`, `${namespace}:entries`];
  return {
    keys,
    async renew(client, id, value, ttlMs) {
      await runLua(client, RENEW, keys, [id, value, Math.max(1, Math.round(ttlMs))]);
    },
    async remove(client, id) {
      await client.multi().zrem(keys[0], id).hdel(keys[1], id).exec();
    },
    async list(client) {
      const [ids, values] = await runLua<[string[], (string | null)[]]>(client, LIST, keys, []);
      return ids.flatMap((id, i) => (values[i] == null ? [] : [{ id, value: values[i]! }]));
    },
  };
}

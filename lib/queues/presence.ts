import { z } from "zod";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { lapsingRegistry } from "@/lib/redis/registry";

/**
 * Which worker processes are alive, and what each consumes. Each process renews its entry every
 * `PRESENCE_MS`; an entry not renewed for `PRESENCE_TTL_MS` is gone. Kept in a registry
 * (lib/redis/registry.ts): reading it costs what the worker processes are, never the keyspace.
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

/** The registry of worker processes (under the prefix, whose hash tag puts both keys in one cluster slot). */
const workers = () => lapsingRegistry(key("presence"));

/** Its two keys (tests clear them). */
export const presenceKeys = () => workers().keys;

/** Says (again) that process `id` is alive, for `ttlMs` from now by Redis's clock. */
export async function announcePresence(
  client: RedisClient,
  id: string,
  presence: Presence,
  ttlMs = PRESENCE_TTL_MS,
): Promise<void> {
  await workers().renew(client, id, JSON.stringify(presence), ttlMs);
}

/** Takes process `id` out at once (a clean stop). */
export async function withdrawPresence(client: RedisClient, id: string): Promise<void> {
  await workers().remove(client, id);
}

/** The worker processes alive now (for /queues, health, readiness and why a job waits). */
export async function livePresences(client: RedisClient = redis()): Promise<Presence[]> {
  return (await workers().list(client)).flatMap(({ value: v }) => {
    try {
      const parsed = presenceSchema.safeParse(JSON.parse(v));
      return parsed.success ? [parsed.data] : [];
    } catch {
      return [];
    }
  });
}

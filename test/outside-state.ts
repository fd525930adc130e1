import { Redis } from "ioredis";
import { beforeAll } from "vitest";

/**
 * Before each test file: the outside services' shared state under the test prefix starts clean —
 * circuit breakers, silence detection (calls in flight, recent latencies: the measured threshold)
 * and the provider's learnt token limits and pauses. That state is one per service for every
 * process on a prefix, as in production, so a file that opened the model's breaker on purpose (a
 * wrong key, a silent server) or paused the provider with a 429 must not decide how the next file's
 * calls go. Tests that need such state make it themselves.
 */
beforeAll(async () => {
  const prefix = process.env.BOUNDED_REDIS_PREFIX;
  if (!prefix) return;
  const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  try {
    await redis.connect();
    for (const pattern of [`${prefix}:breaker:*`, `${prefix}:silence:*`, `${prefix}:ratelimit:provider-tokens:*`]) {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
        if (keys.length > 0) await redis.del(...keys);
        cursor = next;
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
});

import { z } from "zod";
import { db } from "@/lib/db/client";
import { redis, key } from "@/lib/redis/client";
import { verifyPassword } from "./passwords";
import { getSession } from "./session";

export const loginSchema = z.object({
  username: z.string().trim().min(1, "Enter your username").max(64),
  password: z.string().min(1, "Enter your password").max(256),
});

/**
 * Failed sign-ins are limited per username (whatever the address, so a spoofed address does not
 * buy more guesses) and per client address, in a fixed window. Deliberately not multiplied by
 * BOUNDED_TIME_SCALE: it is a security setting, not a job duration.
 */
export const LOGIN_LIMITS = { perUser: 10, perAddress: 30, windowS: 15 * 60 } as const;

export type LoginResult =
  | { type: "ok"; username: string }
  | { type: "invalid" }
  | { type: "throttled"; retryAfterS: number };

// A fixed hash to verify against when the user does not exist, so timing does not tell.
const DUMMY_HASH =
  "scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";

export async function login(input: z.infer<typeof loginSchema>, clientAddress: string): Promise<LoginResult> {
  // Both counters live under the prefix: on a Redis Cluster they share its hash tag's slot, as the
  // MGET and the MULTI below need (a username's own braces come after the tag and change nothing).
  const userKey = key("login-failures", "user", input.username.toLowerCase());
  const addressKey = key("login-failures", "address", clientAddress);
  const [userFailures, addressFailures] = (await redis().mget(userKey, addressKey)).map(Number);
  if ((userFailures ?? 0) >= LOGIN_LIMITS.perUser || (addressFailures ?? 0) >= LOGIN_LIMITS.perAddress) {
    const ttl = Math.max(await redis().ttl(userKey), await redis().ttl(addressKey), 1);
    return { type: "throttled", retryAfterS: ttl };
  }

  const user = await db().user.findUnique({ where: { username: input.username.toLowerCase() } });
  const ok = await verifyPassword(input.password, user?.passwordHash ?? DUMMY_HASH);
  if (!user || !ok) {
    await redis()
      .multi()
      .incr(userKey)
      .expire(userKey, LOGIN_LIMITS.windowS, "NX")
      .incr(addressKey)
      .expire(addressKey, LOGIN_LIMITS.windowS, "NX")
      .exec();
    return { type: "invalid" };
  }
  await redis().del(userKey);
  const session = await getSession();
  session.userId = user.id;
  session.issuedAt = Date.now();
  await session.save();
  return { type: "ok", username: user.username };
}

export async function logout(): Promise<void> {
  const session = await getSession();
  session.destroy();
}

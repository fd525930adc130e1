import { z } from "zod";
import { db } from "@/lib/db/client";
import { redis, key } from "@/lib/redis/client";
import { verifyPassword } from "./passwords";
import { getSession } from "./session";
import { createSession, revokeSession } from "./session-store";

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

/**
 * Check and count in one step: an attempt is counted as a failure before its password is checked,
 * so parallel guesses cannot all pass the check before any of them is counted. At the limit
 * nothing is counted and the longer remaining window is returned.
 */
const TAKE_ATTEMPT = `
local u = tonumber(redis.call('GET', KEYS[1]) or '0')
local a = tonumber(redis.call('GET', KEYS[2]) or '0')
if u >= tonumber(ARGV[1]) or a >= tonumber(ARGV[2]) then
  return math.max(redis.call('TTL', KEYS[1]), redis.call('TTL', KEYS[2]), 1)
end
for i = 1, 2 do
  redis.call('INCR', KEYS[i])
  redis.call('EXPIRE', KEYS[i], ARGV[3], 'NX')
end
return 0
`;

/** A sign-in that succeeds was not a failure: its advance count is taken back. */
const REFUND_ATTEMPT = `
redis.call('DEL', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
return 0
`;

export async function login(input: z.infer<typeof loginSchema>, clientAddress: string): Promise<LoginResult> {
  // Both counters live under the prefix: on a Redis Cluster they share its hash tag's slot, as the
  // script needs (a username's own braces come after the tag and change nothing).
  const keys = [
    key("login-failures", "user", input.username.toLowerCase()),
    key("login-failures", "address", clientAddress),
  ];
  const retryAfterS = Number(
    await redis().eval(TAKE_ATTEMPT, 2, ...keys, LOGIN_LIMITS.perUser, LOGIN_LIMITS.perAddress, LOGIN_LIMITS.windowS),
  );
  if (retryAfterS > 0) return { type: "throttled", retryAfterS };

  const user = await db().user.findUnique({ where: { username: input.username.toLowerCase() } });
  const ok = await verifyPassword(input.password, user?.passwordHash ?? DUMMY_HASH);
  if (!user || !ok) return { type: "invalid" };
  await redis().eval(REFUND_ATTEMPT, 2, ...keys);
  const session = await getSession();
  session.userId = user.id;
  session.sid = await createSession(user.id);
  session.issuedAt = Date.now();
  await session.save();
  return { type: "ok", username: user.username };
}

/** Signs out: the session ends on the server too, so a copy of the cookie is worth nothing. */
export async function logout(): Promise<void> {
  const session = await getSession();
  if (session.sid) await revokeSession(session.sid);
  session.destroy();
}

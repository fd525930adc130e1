import { randomBytes } from "node:crypto";
import { key, redis } from "@/lib/redis/client";

/** Sessions last 12 hours: one on-call shift. */
export const SESSION_TTL_S = 12 * 60 * 60;

/**
 * The server side of a session cookie: a sealed cookie alone cannot be taken back, so each one
 * names a session id that must still exist here. Signing out deletes it; a password change
 * deletes every session of the user. The user's set lists its ids (some may have expired).
 */
const sessionKey = (sid: string) => key("session", sid);
const userSessionsKey = (userId: string) => key("user-sessions", userId);

export async function createSession(userId: string): Promise<string> {
  const sid = randomBytes(24).toString("base64url");
  await redis()
    .multi()
    .set(sessionKey(sid), userId, "EX", SESSION_TTL_S)
    .sadd(userSessionsKey(userId), sid)
    .expire(userSessionsKey(userId), SESSION_TTL_S)
    .exec();
  return sid;
}

/** Whether the session `sid` is live and belongs to `userId`. */
export async function isSessionLive(sid: string, userId: string): Promise<boolean> {
  return (await redis().get(sessionKey(sid))) === userId;
}

export async function revokeSession(sid: string): Promise<void> {
  await redis().del(sessionKey(sid));
}

/** Signs a user out everywhere (a password change); returns how many live sessions ended. */
export async function revokeUserSessions(userId: string): Promise<number> {
  const sids = await redis().smembers(userSessionsKey(userId));
  const ended = sids.length ? await redis().del(...sids.map(sessionKey)) : 0;
  await redis().del(userSessionsKey(userId));
  return ended;
}

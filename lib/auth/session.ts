import "server-only";
import { randomBytes } from "node:crypto";
import { getIronSession, type SessionOptions } from "iron-session";
import { cookies, headers } from "next/headers";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import type { Principal } from "./roles";
import { isSessionLive, SESSION_TTL_S } from "./session-store";

export interface SessionData {
  userId?: string;
  /** The server-side session (lib/auth/session-store.ts): revoked on sign-out and password change. */
  sid?: string;
  issuedAt?: number;
}

export const SESSION_COOKIE = "bounded_session";

let secret: Promise<string> | undefined;

/**
 * The cookie-sealing secret: BOUNDED_SESSION_SECRET, or one generated once and kept in the
 * database so every web process (and every restart) agrees on it.
 */
function sessionSecret(): Promise<string> {
  secret ??= (async () => {
    const configured = env().BOUNDED_SESSION_SECRET;
    if (configured) return configured;
    const generated = randomBytes(32).toString("hex");
    await db().setting.upsert({
      where: { key: "session_secret" },
      create: { key: "session_secret", value: generated },
      update: {},
    });
    const row = await db().setting.findUniqueOrThrow({ where: { key: "session_secret" } });
    return row.value;
  })().catch((err) => {
    secret = undefined;
    throw err;
  });
  return secret;
}

/**
 * `Secure` when configured (BOUNDED_SECURE_COOKIES), or when the proxy in front says the request
 * came over HTTPS: a proxy that terminates TLS is enough, nobody has to remember the setting. A
 * client claiming HTTPS over plain HTTP only loses its own cookie.
 */
async function secureCookies(): Promise<boolean> {
  if (env().BOUNDED_SECURE_COOKIES) return true;
  const proto = (await headers()).get("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase();
  return proto === "https";
}

async function options(): Promise<SessionOptions> {
  return {
    password: await sessionSecret(),
    cookieName: SESSION_COOKIE,
    ttl: SESSION_TTL_S,
    cookieOptions: { httpOnly: true, sameSite: "lax", secure: await secureCookies(), path: "/" },
  };
}

export async function getSession() {
  return getIronSession<SessionData>(await cookies(), await options());
}

/**
 * The signed-in user of this request, re-read from the database (a deleted user is signed out);
 * a cookie whose session was revoked (signed out, password changed) is nobody.
 */
export async function principalFromSession(): Promise<Principal | null> {
  const session = await getSession();
  if (!session.userId || !session.sid) return null;
  if (!(await isSessionLive(session.sid, session.userId))) return null;
  const user = await db().user.findUnique({
    where: { id: session.userId },
    select: { id: true, username: true, role: true },
  });
  return user ? { userId: user.id, username: user.username, role: user.role, via: "session" } : null;
}

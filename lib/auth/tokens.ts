import { createHash, randomBytes } from "node:crypto";
import { db } from "@/lib/db/client";
import type { Principal } from "./roles";

/** Tokens are stored as SHA-256: they are long and random, so a slow hash adds nothing. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** `bnd_` + 32 random bytes (base64url). */
export function newToken(): string {
  return `bnd_${randomBytes(32).toString("base64url")}`;
}

/** The principal of a bearer token, or null for an unknown or revoked one. */
export async function principalFromToken(token: string): Promise<Principal | null> {
  if (token.length < 16 || token.length > 256) return null;
  const row = await db().apiToken.findUnique({
    where: { tokenHash: hashToken(token) },
    select: { id: true, revokedAt: true, user: { select: { id: true, username: true, role: true } } },
  });
  if (!row || row.revokedAt) return null;
  // Best effort: a failed timestamp update must not fail the request.
  db()
    .apiToken.update({ where: { id: row.id }, data: { lastUsedAt: new Date() } })
    .catch(() => undefined);
  return { userId: row.user.id, username: row.user.username, role: row.user.role, via: "token" };
}

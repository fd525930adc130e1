import { z } from "zod";
import { db } from "@/lib/db/client";
import { generatePassword, hashPassword } from "./passwords";
import { ROLES, type Role } from "./roles";
import { revokeUserSessions } from "./session-store";
import { hashToken, newToken } from "./tokens";

export const usernameSchema = z
  .string()
  .trim()
  .regex(/^[a-z0-9][a-z0-9._-]{1,31}$/, "use 2–32 lower-case letters, digits, '.', '_' or '-'");
export const roleSchema = z.enum(ROLES);

/** Creates a user, or resets the password and role of an existing one. Returns the password. */
export async function upsertUser(input: { username: string; role: Role; password?: string }) {
  const username = usernameSchema.parse(input.username);
  const password = input.password ?? generatePassword();
  const passwordHash = await hashPassword(password);
  const existed = (await db().user.count({ where: { username } })) > 0;
  const user = await db().user.upsert({
    where: { username },
    create: { username, role: input.role, passwordHash },
    update: { role: input.role, passwordHash },
    select: { id: true, username: true, role: true },
  });
  // A new password signs the user out everywhere: whoever had the old one keeps no session.
  if (existed) await revokeUserSessions(user.id);
  return { user, password };
}

/** Sets a new password (given or generated) and signs the user out everywhere. Returns the password. */
export async function changePassword(username: string, newPassword?: string): Promise<string> {
  const user = await db().user.findUnique({ where: { username: usernameSchema.parse(username) } });
  if (!user) throw new Error(`No user named "${username}".`);
  const password = newPassword ?? generatePassword();
  await db().user.update({ where: { id: user.id }, data: { passwordHash: await hashPassword(password) } });
  await revokeUserSessions(user.id);
  return password;
}

/** Issues a new API token for a user; the token is shown once and stored hashed. */
export async function issueToken(username: string, name = "cli"): Promise<string> {
  const user = await db().user.findUnique({ where: { username: usernameSchema.parse(username) } });
  if (!user)
    throw new Error(`No user named "${username}". Create it first: npm run users -- add ${username} --role viewer`);
  const token = newToken();
  await db().apiToken.create({ data: { userId: user.id, name, tokenHash: hashToken(token) } });
  return token;
}

/** Revokes every token of a user; returns how many were revoked. */
export async function revokeTokens(username: string): Promise<number> {
  const { count } = await db().apiToken.updateMany({
    where: { user: { username }, revokedAt: null },
    data: { revokedAt: new Date() },
  });
  return count;
}

/**
 * First start: with no user at all, an operator `admin` is created (password from
 * BOUNDED_ADMIN_PASSWORD, or generated and returned so the caller prints it once).
 * With a bootstrap token configured, an operator token with exactly that value exists.
 */
export async function ensureBootstrap(options: { adminPassword?: string; bootstrapToken?: string }) {
  let createdAdmin: { username: string; password: string; generated: boolean } | null = null;
  if ((await db().user.count()) === 0) {
    const { password } = await upsertUser({ username: "admin", role: "operator", password: options.adminPassword });
    createdAdmin = { username: "admin", password, generated: !options.adminPassword };
  }
  if (options.bootstrapToken) {
    const tokenHash = hashToken(options.bootstrapToken);
    const existing = await db().apiToken.findUnique({ where: { tokenHash } });
    if (!existing) {
      const owner =
        (await db().user.findFirst({ where: { role: "operator" }, orderBy: { createdAt: "asc" } })) ??
        (await upsertUser({ username: "admin", role: "operator", password: options.adminPassword })).user;
      // A new bootstrap value replaces the old one: the previous bootstrap token stops working.
      await db().apiToken.updateMany({
        where: { name: "bootstrap", revokedAt: null },
        data: { revokedAt: new Date() },
      });
      await db().apiToken.create({ data: { userId: owner.id, name: "bootstrap", tokenHash } });
    }
  }
  return { createdAdmin };
}

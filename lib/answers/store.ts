import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import type { Described } from "@/lib/http/operator";
import { logger } from "@/lib/log";
import { tenantSlugSchema } from "@/lib/tenants/slug";

const log = logger("answers");

const DAY_MS = 86_400_000;

/** A stored answer: the slug, and the row's share of the call that gave it (what reusing it saves). */
export interface StoredAnswer {
  slug: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  callShare: number;
}

/**
 * The tenant's unexpired answer for `key`, counting the hit; null when there is none (never
 * stored, expired, or cleared).
 */
export async function answerFromCache(tenantId: string, key: string): Promise<StoredAnswer | null> {
  return (await answersFromCache(tenantId, [key])).get(key) ?? null;
}

/**
 * The tenant's unexpired answers for `keys`, in one statement, counting a hit on each; a key with
 * none (never stored, expired, or cleared) is not in the map.
 */
export async function answersFromCache(tenantId: string, keys: readonly string[]): Promise<Map<string, StoredAnswer>> {
  if (keys.length === 0) return new Map();
  const rows = await db().$queryRaw<(StoredAnswer & { key: string })[]>`
    UPDATE "CategoryAnswer" SET hits = hits + 1
    WHERE "tenantId" = ${tenantId}::uuid AND key = ANY(${[...new Set(keys)]}::bpchar[]) AND "expiresAt" > now()
    RETURNING key, slug, model, "promptTokens", "completionTokens", "callShare"`;
  return new Map(rows.map(({ key, ...answer }) => [key, answer]));
}

export interface RememberedAnswer extends StoredAnswer {
  tenantId: string;
  key: string;
  promptVersion: number;
  /** When the model answered. @defaultValue now */
  answeredAt?: Date;
  /** @defaultValue `env().BOUNDED_CATEGORY_ANSWER_TTL_DAYS` */
  ttlDays?: number;
}

/**
 * Stores what the model answered for `key`, for `ttlDays` from when it answered. An entry already
 * there is replaced only by a later answer: a slow writer of an older answer (another job of the
 * tenant that asked the same question earlier) never overwrites a newer one. Tokens are stored
 * rounded to whole numbers.
 */
export async function rememberAnswer(answer: RememberedAnswer): Promise<void> {
  await rememberAnswers([answer]);
}

/**
 * `rememberAnswer` for many answers in one statement. Of two answers for the same tenant and key,
 * the later one is kept (one statement cannot write a row twice).
 */
export async function rememberAnswers(answers: readonly RememberedAnswer[]): Promise<void> {
  const latest = new Map<string, RememberedAnswer & { answeredAt: Date; expiresAt: Date }>();
  const defaultTtlDays = env().BOUNDED_CATEGORY_ANSWER_TTL_DAYS;
  for (const answer of answers) {
    const answeredAt = answer.answeredAt ?? new Date();
    const expiresAt = new Date(answeredAt.getTime() + (answer.ttlDays ?? defaultTtlDays) * DAY_MS);
    const id = `${answer.tenantId} ${answer.key}`;
    const kept = latest.get(id);
    if (!kept || kept.answeredAt <= answeredAt) latest.set(id, { ...answer, answeredAt, expiresAt });
  }
  if (latest.size === 0) return;
  const rows = [...latest.values()];
  await db().$executeRaw`
    INSERT INTO "CategoryAnswer" ("tenantId", key, slug, model, "promptVersion", "promptTokens",
      "completionTokens", "callShare", "createdAt", "expiresAt")
    SELECT t, k, s, m, v, p, c, share, answered AT TIME ZONE 'UTC', expires AT TIME ZONE 'UTC'
    FROM unnest(${rows.map((a) => a.tenantId)}::uuid[], ${rows.map((a) => a.key)}::bpchar[],
      ${rows.map((a) => a.slug)}::text[], ${rows.map((a) => a.model)}::text[], ${rows.map((a) => a.promptVersion)}::int[],
      ${rows.map((a) => Math.round(a.promptTokens))}::int[], ${rows.map((a) => Math.round(a.completionTokens))}::int[],
      ${rows.map((a) => a.callShare)}::float8[], ${rows.map((a) => a.answeredAt.toISOString())}::timestamptz[],
      ${rows.map((a) => a.expiresAt.toISOString())}::timestamptz[]) AS u(t, k, s, m, v, p, c, share, answered, expires)
    ON CONFLICT ("tenantId", key) DO UPDATE SET
      slug = EXCLUDED.slug, model = EXCLUDED.model, "promptVersion" = EXCLUDED."promptVersion",
      "promptTokens" = EXCLUDED."promptTokens", "completionTokens" = EXCLUDED."completionTokens",
      "callShare" = EXCLUDED."callShare", "createdAt" = EXCLUDED."createdAt",
      "expiresAt" = EXCLUDED."expiresAt", hits = 0
    WHERE "CategoryAnswer"."createdAt" < EXCLUDED."createdAt"`;
}

/** How many expired answers one statement deletes: a pass never holds a long lock on the table. */
export const PRUNE_CHUNK = 5_000;

/**
 * Deletes expired answers (they are misses already; this only gives their space back), in chunks
 * of `PRUNE_CHUNK` until none is left. Returns how many went. Run by the workers' answers pruner.
 */
export async function pruneExpiredAnswers(now = new Date()): Promise<number> {
  let removed = 0;
  for (;;) {
    const n = await db().$executeRaw`
      DELETE FROM "CategoryAnswer" WHERE id IN (
        SELECT id FROM "CategoryAnswer" WHERE "expiresAt" <= ${now} ORDER BY "expiresAt" LIMIT ${PRUNE_CHUNK})`;
    removed += n;
    if (n < PRUNE_CHUNK) return removed;
  }
}

export type ClearCategoryAnswersResult =
  | { type: "invalid_tenant"; message: string }
  | { type: "not_found"; tenant: string }
  | { type: "cleared"; tenant: string; removed: number };

/**
 * Forgets every stored category answer of a tenant: its next imports ask the model again for
 * every question. A job already running keeps sharing answers between its own rows and stores
 * the answers it gets from then on. The one operator action behind `DELETE
 * /api/tenants/<tenant>/category-answers` and the form on /model-calls.
 */
export async function clearCategoryAnswers(tenant: string): Promise<ClearCategoryAnswersResult> {
  const parsed = tenantSlugSchema.safeParse(tenant);
  if (!parsed.success) return { type: "invalid_tenant", message: parsed.error.issues[0]!.message };
  const slug = parsed.data;
  const row = await db().tenant.findUnique({ where: { slug }, select: { id: true } });
  if (!row) return { type: "not_found", tenant: slug };
  const { count } = await db().categoryAnswer.deleteMany({ where: { tenantId: row.id } });
  log.info({ tenant: slug, removed: count }, "category answers cleared");
  return { type: "cleared", tenant: slug, removed: count };
}

/** The outcome of `clearCategoryAnswers` as the audit log, an API caller and the form read it. */
export function describeClearCategoryAnswers(r: ClearCategoryAnswersResult): Described {
  switch (r.type) {
    case "invalid_tenant":
      return { ok: false, status: 422, code: "invalid_tenant", message: r.message };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: `There is no tenant “${r.tenant}”.` };
    case "cleared":
      return {
        ok: true,
        status: 200,
        code: "cleared",
        message: `Cleared ${r.removed} stored category ${r.removed === 1 ? "answer" : "answers"} of ${r.tenant}; its next imports ask the model again.`,
        body: { tenant: r.tenant, removed: r.removed },
      };
  }
}

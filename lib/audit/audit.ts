import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import type { Principal } from "@/lib/auth/roles";
import { logger } from "@/lib/log";

const log = logger("audit");

export type AuditResult = "ok" | "refused" | "error";

export interface AuditInput {
  principal: Principal | null;
  action: string;
  target?: string | null;
  params?: Prisma.InputJsonValue;
  result: AuditResult;
  message: string;
  clientAddress?: string | null;
}

/**
 * Appends one entry to the audit log. The table refuses updates and deletes (a trigger), so an
 * entry, once written, is what happened. A failure to write is logged loudly and rethrown: an
 * operator action must not go unrecorded.
 */
export async function recordAudit(input: AuditInput): Promise<void> {
  try {
    await db().auditEntry.create({
      data: {
        actor: input.principal?.username ?? "anonymous",
        role: input.principal?.role ?? null,
        action: input.action,
        target: input.target ?? null,
        params: input.params,
        result: input.result,
        message: input.message.slice(0, 1000),
        clientAddress: input.clientAddress ?? null,
      },
    });
  } catch (err) {
    log.error({ err, action: input.action, actor: input.principal?.username }, "could not write the audit entry");
    throw err;
  }
}

export const auditFilterSchema = z.object({
  actor: z.string().trim().max(64).optional(),
  action: z.string().trim().max(64).optional(),
  result: z.enum(["ok", "refused", "error"]).optional(),
  target: z.string().trim().max(100).optional(),
  before: z.coerce.number().int().positive().optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
export type AuditFilter = z.input<typeof auditFilterSchema>;

export interface AuditRow {
  id: string;
  at: string;
  actor: string;
  role: string | null;
  action: string;
  target: string | null;
  params: Prisma.JsonValue;
  result: AuditResult;
  message: string;
  clientAddress: string | null;
}

/** Newest first, keyset-paginated on the id (`before`). */
export async function listAudit(filter: AuditFilter): Promise<{ entries: AuditRow[]; nextBefore: string | null }> {
  const f = auditFilterSchema.parse(filter);
  const rows = await db().auditEntry.findMany({
    where: {
      ...(f.actor ? { actor: f.actor } : {}),
      ...(f.action ? { action: f.action } : {}),
      ...(f.result ? { result: f.result } : {}),
      ...(f.target ? { target: f.target } : {}),
      ...(f.before ? { id: { lt: BigInt(f.before) } } : {}),
    },
    orderBy: { id: "desc" },
    take: f.limit + 1,
  });
  const page = rows.slice(0, f.limit);
  return {
    entries: page.map((r) => ({ ...r, id: r.id.toString(), at: r.at.toISOString() })),
    nextBefore: rows.length > f.limit ? (page.at(-1)?.id.toString() ?? null) : null,
  };
}

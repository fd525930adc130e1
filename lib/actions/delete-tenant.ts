import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { db } from "@/lib/db/client";
import { formatCount } from "@/lib/format/number";
import type { Described } from "@/lib/http/operator";
import { logger } from "@/lib/log";
import { snapshotKeys } from "@/lib/progress/snapshot";
import { FAMILIES } from "@/lib/ratelimit/buckets";
import {
  type DeletionOptions,
  type DeletionProgress,
  type DeletionRun,
  deletionProgressOf,
  runTenantDeletion,
  startTenantDeletion,
} from "./tenant-deletion";
import { countTenantRows, type TenantRef } from "./tenant-tables";

export { GLOBAL_TABLES, TENANT_TABLES } from "./tenant-tables";

/**
 * Deleting a tenant: every row that is the tenant's or names one of its jobs, its files, answers,
 * limiter buckets, progress snapshots and queue jobs — everything but the audit log, which keeps
 * the entry of the deletion itself. A dry run by default (what would go, counted); started only
 * when the caller confirms with the tenant's name, and refused while any of its jobs is still
 * queued, running or waiting (they would write again). Once started, the tenant takes no new
 * work and its rows go a batch at a time (./tenant-deletion.ts): the request works for
 * `REQUEST_SLICE_MS`, answers `deleted` when that was enough and `deleting` with the count so far
 * when not, and the workers go on until the row itself is gone. Asking again (with or without
 * the confirm) answers how far it got.
 */

/**
 * Real ms a confirmed request deletes before it answers: a tenant of tens of thousands of rows is
 * gone by then, and no proxy in front of the API gives up on the request first (they allow 30 s
 * and more). A larger one is left to the workers.
 */
export const REQUEST_SLICE_MS = 3_000;

export const deleteTenantQuerySchema = z.strictObject({
  /** The tenant's name again: without it, nothing is deleted and the answer says what would be. */
  confirm: z.string().max(100).optional(),
});

export type DeleteTenantResult =
  | { type: "not_found"; tenant: string }
  | { type: "open_jobs"; tenant: string; open: number }
  | { type: "confirm_mismatch"; tenant: string; confirm: string }
  | { type: "preview" | "deleted"; tenant: string; rows: Record<string, number>; redisKeys: number }
  | ({ type: "deleting"; tenant: string } & DeletionProgress);

export interface DeleteTenantOptions extends DeletionOptions {
  /** Real ms the request deletes before it answers. @defaultValue `REQUEST_SLICE_MS` */
  sliceMs?: number;
}

export async function deleteTenant(
  slug: string,
  by: Principal,
  input: z.output<typeof deleteTenantQuerySchema>,
  options: DeleteTenantOptions = {},
): Promise<DeleteTenantResult> {
  const tenant = await db().tenant.findUnique({ where: { slug }, select: { id: true, slug: true, deletingAt: true } });
  if (!tenant) return { type: "not_found", tenant: slug };
  if (input.confirm !== undefined && input.confirm !== tenant.slug)
    return { type: "confirm_mismatch", tenant: tenant.slug, confirm: input.confirm };
  if (input.confirm === undefined) return tenant.deletingAt ? deletionSoFar(tenant) : preview(tenant);
  const started = await startTenantDeletion(tenant);
  if (started.type === "open_jobs") return { type: "open_jobs", tenant: tenant.slug, open: started.open };
  const log = logger("tenants");
  if (started.fresh) log.info({ tenant: tenant.slug, by: by.username }, "tenant deletion started");
  try {
    const until = performance.now() + (options.sliceMs ?? REQUEST_SLICE_MS);
    const run = await runTenantDeletion(tenant, { ...options, until });
    if (run.done) return deleted(tenant, run, by);
  } catch (err) {
    // Started is started: the workers go on from what is left (./tenant-deletion.ts).
    log.warn({ tenant: tenant.slug, err }, "tenant deletion interrupted; the workers go on with it");
  }
  return deletionSoFar(tenant);
}

async function preview(tenant: TenantRef): Promise<DeleteTenantResult> {
  const rows = await countTenantRows(tenant);
  // Its limiter buckets, and each job's progress snapshot keys and cancel request.
  const redisKeys = FAMILIES.length + rows.Job! * (snapshotKeys("").length + 1);
  return { type: "preview", tenant: tenant.slug, rows, redisKeys };
}

/** A started deletion as its row tells it; `not_found` once the row went (the workers finished it). */
async function deletionSoFar(tenant: TenantRef): Promise<DeleteTenantResult> {
  const row = await db().tenant.findUnique({
    where: { id: tenant.id },
    select: { deletingAt: true, deletedRows: true },
  });
  if (!row?.deletingAt) return { type: "not_found", tenant: tenant.slug };
  return { type: "deleting", tenant: tenant.slug, ...deletionProgressOf({ ...row, deletingAt: row.deletingAt }) };
}

/** A deletion this request finished: what every run of it removed (the row counted it until it went). */
function deleted(tenant: TenantRef, run: DeletionRun, by: Principal): DeleteTenantResult {
  const { rows, redisKeys } = run.total ?? { rows: run.removed, redisKeys: run.redisKeys };
  logger("tenants").info({ tenant: tenant.slug, by: by.username, rows, redisKeys }, "tenant deleted");
  return { type: "deleted", tenant: tenant.slug, rows, redisKeys };
}

/** One place that turns a deletion's result into an HTTP status and the words a person reads. */
export function describeDeleteTenant(r: DeleteTenantResult): Described {
  switch (r.type) {
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: `No tenant is named “${r.tenant}”.` };
    case "confirm_mismatch":
      return {
        ok: false,
        status: 422,
        code: "confirm_mismatch",
        message: `confirm must repeat the tenant's name exactly (“${r.tenant}”), got “${r.confirm}”: nothing was deleted.`,
      };
    case "open_jobs":
      return {
        ok: false,
        status: 409,
        code: "tenant_has_open_jobs",
        message: `${r.tenant} has ${countOf(r.open, "job")} still queued, running or waiting: cancel them or let them finish, then delete the tenant. Nothing was deleted.`,
      };
    case "preview":
      return {
        ok: true,
        status: 200,
        code: "preview",
        message: `Nothing deleted yet. Deleting ${r.tenant} would remove ${rowsPhrase(r.rows)} and ${countOf(r.redisKeys, "Redis key")}; repeat with ?confirm=${r.tenant} to do it.`,
        audit: `dry run: would remove ${rowsPhrase(r.rows)}`,
      };
    case "deleted":
      return {
        ok: true,
        status: 200,
        code: "deleted",
        message: `Deleted ${r.tenant}: ${rowsPhrase(r.rows)} and ${countOf(r.redisKeys, "Redis key")} removed.`,
      };
    case "deleting":
      return {
        ok: true,
        status: 202,
        code: "deleting",
        message: `${r.tenant} is being deleted (since ${r.since.toISOString()}): ${rowsPhrase(r.rows)} and ${countOf(r.redisKeys, "Redis key")} removed so far. It goes on by itself, a batch at a time, until every row is gone; meanwhile the tenant takes no new work. Ask again to see how far it got.`,
      };
  }
}

const countOf = (n: number, noun: string) => `${formatCount(n)} ${noun}${n === 1 ? "" : "s"}`;

function rowsPhrase(rows: Record<string, number>): string {
  const total = Object.values(rows).reduce((a, b) => a + b, 0);
  const tables = Object.entries(rows)
    .filter(([, n]) => n > 0)
    .map(([t, n]) => `${t} ${formatCount(n)}`);
  return tables.length ? `${countOf(total, "row")} (${tables.join(", ")})` : countOf(total, "row");
}

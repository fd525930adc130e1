import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { db, type Prisma } from "@/lib/db/client";
import { formatCount } from "@/lib/format/number";
import { routeFor } from "@/lib/model-providers";
import { ENDED_IMPORT_STATUSES, REASK_ROWS, ROWS_LABEL, reaskRows, type ReaskRows } from "./reask";
import { describeReask } from "./reask-messages";
import type { Described } from "@/lib/http/operator";

/** More than this many imports in one bulk re-ask is refused: narrow the filter instead. */
export const BULK_REASK_CAP = 100;

/**
 * `POST /api/jobs/reask`: the rows of every ended import matching a filter asked again on one
 * provider, one `reaskRows` each (each its own job, audited once for the whole), after a dry run
 * that says how many imports and rows it would take.
 */
export const bulkReaskSchema = z
  .object({
    filter: z
      .object({
        tenant: z.string().trim().toLowerCase().max(63).optional(),
        /** Imports created at or after this time (ISO 8601). */
        from: z.iso.datetime({ offset: true }).optional(),
        /** Imports created before this time (ISO 8601). */
        to: z.iso.datetime({ offset: true }).optional(),
      })
      .strict(),
    route: z.string().trim().min(1, "route names a model provider, as primary").max(40),
    rows: z.enum(REASK_ROWS, { error: `rows is one of ${REASK_ROWS.join(", ")}` }).default("fallback"),
    dryRun: z.boolean().default(false),
  })
  .strict();
export type BulkReask = z.infer<typeof bulkReaskSchema>;

/** Ended imports of the filter that have rows of that choice. */
function where(f: BulkReask["filter"], rows: ReaskRows): Prisma.JobWhereInput {
  const first = routeFor("csv_import")[0]!.model;
  return {
    kind: "csv_import",
    status: { in: [...ENDED_IMPORT_STATUSES] },
    children: { none: {} },
    detailPrunedAt: null,
    resultsPrunedAt: null,
    ...(rows === "fallback" ? { categoryAnswerUses: { some: { model: { not: first } } } } : {}),
    ...(rows === "failed" ? { failed: { gt: 0 } } : {}),
    ...(rows === "all" ? { OR: [{ processed: { gt: 0 } }, { failed: { gt: 0 } }] } : {}),
    ...(f.tenant ? { tenant: { slug: f.tenant } } : {}),
    ...(f.from || f.to
      ? { createdAt: { ...(f.from ? { gte: new Date(f.from) } : {}), ...(f.to ? { lt: new Date(f.to) } : {}) } }
      : {}),
  };
}

export type BulkReaskResult =
  | { type: "preview"; imports: number; cap: number; overCap: boolean; message: string }
  /** From the jobs page, which re-asks only the choice whose count the operator saw: it changed since. */
  | { type: "choice_changed" }
  | { type: "over_cap"; imports: number; message: string }
  | { type: "done"; matched: number; started: string[]; refused: { jobId: string; reason: string }[]; message: string };

/** What the imports must have, in words: "rows a fallback answered", "failed rows", "rows". */
const HAVING: Record<ReaskRows, string> = { fallback: "rows a fallback answered", failed: "failed rows", all: "rows" };

export async function bulkReask(body: BulkReask, by: Principal): Promise<BulkReaskResult> {
  const imports = await db().job.count({ where: where(body.filter, body.rows) });
  const matching = `${formatCount(imports)} ended import${imports === 1 ? " has" : "s have"} ${HAVING[body.rows]}`;
  if (body.dryRun)
    return {
      type: "preview",
      imports,
      cap: BULK_REASK_CAP,
      overCap: imports > BULK_REASK_CAP,
      message:
        imports === 0
          ? `No ended import has ${HAVING[body.rows]}: nothing to ask again.`
          : imports > BULK_REASK_CAP
            ? `${matching}; a bulk re-ask takes at most ${BULK_REASK_CAP}. Narrow the filter (tenant, time range).`
            : `${matching}: each would be asked again on ${body.route}, as a job of its own.`,
    };
  if (imports > BULK_REASK_CAP)
    return {
      type: "over_cap",
      imports,
      message: `${matching}; a bulk re-ask takes at most ${BULK_REASK_CAP}. Narrow the filter (tenant, time range).`,
    };
  const ids = await db().job.findMany({
    where: where(body.filter, body.rows),
    select: { id: true },
    orderBy: { createdAt: "asc" },
    take: BULK_REASK_CAP,
  });
  const started: string[] = [];
  const refused: { jobId: string; reason: string }[] = [];
  for (const { id } of ids) {
    const r = await reaskRows(id, by, { route: body.route, rows: body.rows });
    if (r.type === "reasked") started.push(r.jobId);
    else refused.push({ jobId: id, reason: describeReask(r).message });
  }
  const notStarted = refused.length ? `; ${refused.length} could not be (the first: ${refused[0]!.reason})` : "";
  return {
    type: "done",
    matched: ids.length,
    started,
    refused,
    message: `Asking the ${ROWS_LABEL[body.rows]} of ${formatCount(started.length)} of ${formatCount(ids.length)} matching imports again on ${body.route}, each as a job of its own${notStarted}.`,
  };
}

/** A bulk re-ask (or its dry run) as an HTTP status and words. */
export function describeBulkReask(r: BulkReaskResult): Described {
  switch (r.type) {
    case "preview":
      return {
        ok: true,
        status: 200,
        code: "preview",
        message: r.message,
        body: { imports: r.imports, cap: r.cap, overCap: r.overCap, message: r.message },
      };
    case "over_cap":
      return { ok: false, status: 422, code: "too_many_imports", message: r.message };
    case "done":
      return { ok: true, status: 202, code: "reasked", message: r.message };
    case "choice_changed":
      return {
        ok: false,
        status: 409,
        code: "choice_changed",
        message: "The choice changed since the preview: preview again before asking.",
      };
  }
}

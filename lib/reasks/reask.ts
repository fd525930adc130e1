import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { KINDS } from "@/lib/catalog/catalog";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { countLabel, detailRemovedMessage, resultsRemovedMessage } from "@/lib/jobs/messages";
import { createJob, EnqueueFailed } from "@/lib/jobs/create";
import { modelRouting, providerOfName, routeFor, type ModelProvider } from "@/lib/model-providers";
import { estimateCostUsd } from "@/lib/modelcalls/usage";
import { measuredLatency } from "@/lib/ratelimit/measured-latency";
import { unscaled } from "@/lib/time";
import { tenantBeingDeletedMessage } from "@/lib/tenants/being-deleted";
import { OPEN_STATUSES, type JobStatus } from "@/lib/core/job-statuses";

/**
 * Re-asking an import's rows on a model provider an operator chooses: the rows a fallback answered
 * (any model but the first on the import's route), the failed ones, or all. It runs as a job of its
 * own (`category_reask`, ./run.ts) on the imports queue, its route that one provider alone; each
 * row's earlier answer is kept beside the new one (`CategoryReask`) and the import's row takes the
 * new category. The job page's form and `POST /api/jobs/<id>/retry` with `route` call `reaskRows`;
 * both show `planReask` first.
 */

export const REASK_ROWS = ["fallback", "failed", "all"] as const;
export type ReaskRows = (typeof REASK_ROWS)[number];

/** The most rows one re-ask takes: their numbers are kept on the job, so a resume asks the same rows. */
export const MAX_REASK_ROWS = 20_000;

/** What a `category_reask` job was asked to do, kept on its row. */
export const reaskParamsSchema = z.object({
  sourceJobId: z.uuid(),
  provider: z.string(),
  rows: z.enum(REASK_ROWS),
  /** The spreadsheet rows, in order: the job's items. */
  list: z.array(z.number().int().positive()),
});
export type ReaskParams = z.infer<typeof reaskParamsSchema>;

/** The rows chosen, in words: "rows a fallback answered". */
export const ROWS_LABEL: Record<ReaskRows, string> = {
  fallback: "rows a fallback answered",
  failed: "failed rows",
  all: "all rows",
};

/** The import's rows a re-ask of `rows` would ask, by spreadsheet row, ascending. */
export async function rowsToReask(sourceJobId: string, rows: ReaskRows): Promise<number[]> {
  const first = routeFor("csv_import")[0]!.model;
  const answered =
    rows === "fallback"
      ? await db().$queryRaw<{ row: number }[]>`
          SELECT row FROM "CategoryAnswerUse" WHERE "jobId" = ${sourceJobId}::uuid AND model <> ${first} ORDER BY row`
      : rows === "all"
        ? await db().$queryRaw<{ row: number }[]>`SELECT row FROM "Transaction" WHERE "jobId" = ${sourceJobId}::uuid`
        : [];
  const failed =
    rows === "fallback"
      ? []
      : await db().$queryRaw<{ row: number }[]>`SELECT row FROM "JobItemFailure" WHERE "jobId" = ${sourceJobId}::uuid`;
  return [...new Set([...answered, ...failed].map((r) => r.row))].sort((a, b) => a - b);
}

/** How many rows a re-ask of `rows` would ask: counted, not listed (the job page asks for every choice). */
async function countRowsToReask(sourceJobId: string): Promise<Record<ReaskRows, number>> {
  const first = routeFor("csv_import")[0]!.model;
  const [c] = await db().$queryRaw<{ fallback: number; answered: number; failed: number }[]>`
    SELECT
      (SELECT count(*)::int FROM "CategoryAnswerUse" WHERE "jobId" = ${sourceJobId}::uuid AND model <> ${first}) AS fallback,
      (SELECT count(*)::int FROM "Transaction" WHERE "jobId" = ${sourceJobId}::uuid) AS answered,
      (SELECT count(*)::int FROM "JobItemFailure" WHERE "jobId" = ${sourceJobId}::uuid) AS failed`;
  return { fallback: c!.fallback, failed: c!.failed, all: c!.answered + c!.failed };
}

/** What a re-ask would do, shown before it is sent. */
export interface ReaskPlan {
  provider: string;
  model: string;
  rows: ReaskRows;
  count: number;
  /** Model calls of `modelBatch` rows. */
  calls: number;
  /** At the provider's price and the import's tokens per row so far; null without a price or a measure. */
  costUsd: number | null;
  /** Production seconds at the provider's median answer, its calls in flight at once; null before it is measured. */
  seconds: number | null;
}

/** Tokens per row of the import's rows the model answered so far (its own measure of what a row costs). */
async function tokensPerRow(sourceJobId: string): Promise<{ prompt: number; completion: number } | null> {
  const [r] = await db().$queryRaw<{ prompt: number | null; completion: number | null }[]>`
    SELECT avg("promptTokens")::float8 AS prompt, avg("completionTokens")::float8 AS completion
    FROM "CategoryAnswerUse" WHERE "jobId" = ${sourceJobId}::uuid AND source = 'model'`;
  return r?.prompt == null ? null : { prompt: r.prompt, completion: r.completion ?? 0 };
}

/** The plan of re-asking `count` rows on `provider`, with the import's tokens per row. */
async function planOf(
  provider: ModelProvider,
  rows: ReaskRows,
  count: number,
  perRow: { prompt: number; completion: number } | null,
): Promise<ReaskPlan> {
  const spec = KINDS.category_reask;
  const calls = Math.ceil(count / spec.modelBatch.size);
  const costUsd =
    perRow &&
    estimateCostUsd(provider.model, perRow.prompt * count, perRow.completion * count, env().BOUNDED_MODEL_PRICES);
  const latency = await measuredLatency(provider.service);
  const inFlight = Math.min(provider.concurrency, Math.ceil(spec.itemConcurrency.n / spec.modelBatch.size));
  const seconds = latency && Math.ceil((Math.ceil(calls / inFlight) * unscaled(latency.p50Ms)) / 1000);
  return { provider: provider.name, model: provider.model, rows, count, calls, costUsd: costUsd ?? null, seconds };
}

/** Every plan the job page's form may show: each provider, each choice of rows. */
export async function reaskPlans(sourceJobId: string): Promise<ReaskPlan[]> {
  const [perRow, counts] = await Promise.all([tokensPerRow(sourceJobId), countRowsToReask(sourceJobId)]);
  return Promise.all(
    modelRouting().providers.flatMap((provider) =>
      REASK_ROWS.map((rows) => planOf(provider, rows, counts[rows], perRow)),
    ),
  );
}

export const reaskRequestSchema = z
  .object({
    route: z.string().trim().min(1, "route names a provider").max(40),
    rows: z.enum(REASK_ROWS, { error: `rows is one of ${REASK_ROWS.join(", ")}` }).default("fallback"),
  })
  .strict();
export type ReaskRequest = z.input<typeof reaskRequestSchema>;

export type ReaskResult =
  | { type: "reasked"; jobId: string; sourceJobId: string; plan: ReaskPlan; message: string }
  | { type: "not_found" }
  | { type: "refused"; status: 409 | 410 | 422; code: string; message: string }
  | { type: "queue_unavailable"; message: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** An import in one of these has ended: its rows may be asked again. */
export const ENDED_IMPORT_STATUSES = [
  "completed",
  "completed_with_errors",
  "timed_out",
  "failed",
  "abandoned",
  "cancelled",
] as const satisfies readonly JobStatus[];

type Refusal = Exclude<ReaskResult, { type: "reasked" | "queue_unavailable" }>;

/** The import a re-ask reads, or why it may not be re-asked. */
async function reaskSource(jobId: string): Promise<{ refusal: Refusal } | { job: { tenant: { slug: string } } }> {
  const job = await db().job.findUnique({
    where: { id: jobId },
    select: {
      kind: true,
      status: true,
      detailPrunedAt: true,
      resultsPrunedAt: true,
      tenant: { select: { slug: true, deletingAt: true, resultsRetainDays: true } },
      _count: { select: { children: true } },
    },
  });
  if (!job) return { refusal: { type: "not_found" } };
  const refuse = (status: 409 | 410 | 422, code: string, message: string) => ({
    refusal: { type: "refused" as const, status, code, message },
  });
  if (job.kind !== "csv_import") return refuse(409, "not_an_import", "Only an import's rows can be asked again.");
  if (job.tenant.deletingAt)
    return refuse(409, "tenant_being_deleted", tenantBeingDeletedMessage(job.tenant.slug, job.tenant.deletingAt));
  if (job._count.children > 0)
    return refuse(409, "job_was_split", "This import was split into parts: ask the parts' rows again instead.");
  if (!(ENDED_IMPORT_STATUSES as readonly string[]).includes(job.status))
    return refuse(409, "job_not_ended", `It is ${job.status}: rows are asked again once the import has ended.`);
  if (job.resultsPrunedAt)
    return refuse(410, "job_results_removed", resultsRemovedMessage(job.resultsPrunedAt, job.tenant.resultsRetainDays));
  if (job.detailPrunedAt) return refuse(410, "job_detail_removed", detailRemovedMessage(job.detailPrunedAt));
  return { job };
}

/**
 * Starts a re-ask of an import's rows on the provider `request.route` names, after the same
 * checks the plan shows: an ended import of its own rows, a provider configured, rows to ask
 * (at most `MAX_REASK_ROWS`), no other re-ask of it still open (a second is refused, naming the first).
 * The operator's name goes on the new job's timeline; the audit entry is the caller's.
 */
export async function reaskRows(jobId: string, by: Principal, input: ReaskRequest): Promise<ReaskResult> {
  if (!UUID.test(jobId)) return { type: "not_found" };
  const request = reaskRequestSchema.parse(input);
  const provider = providerOfName(request.route);
  if (!provider)
    return {
      type: "refused",
      status: 422,
      code: "unknown_provider",
      message: `No model provider "${request.route}" (there are: ${modelRouting()
        .providers.map((p) => p.name)
        .join(", ")}).`,
    };
  const source = await reaskSource(jobId);
  if ("refusal" in source) return source.refusal;
  const list = await rowsToReask(jobId, request.rows);
  if (list.length === 0)
    return {
      type: "refused",
      status: 409,
      code: "no_rows",
      message: `This import has no ${ROWS_LABEL[request.rows]}.`,
    };
  if (list.length > MAX_REASK_ROWS)
    return {
      type: "refused",
      status: 422,
      code: "too_many_rows",
      message: `That is ${countLabel(list.length, "row")}; one re-ask takes at most ${MAX_REASK_ROWS.toLocaleString("en-US")}. Split the import and ask its parts' rows again.`,
    };
  const plan = await planOf(provider, request.rows, list.length, await tokensPerRow(jobId));
  const params: ReaskParams = { sourceJobId: jobId, provider: provider.name, rows: request.rows, list };
  const message = `Asking ${countLabel(list.length, "row")} (${ROWS_LABEL[request.rows]}) of import ${jobId} again on ${provider.name} (${provider.model}), as ${by.username} asked.`;
  try {
    const created = await createJob({
      kind: "category_reask",
      tenantSlug: source.job.tenant.slug,
      total: list.length,
      params,
      onePerKey: {
        key: `category_reask:${jobId}`,
        findOpen: (tx) =>
          tx.job.findFirst({
            where: {
              kind: "category_reask",
              status: { in: [...OPEN_STATUSES] },
              params: { path: ["sourceJobId"], equals: jobId },
            },
            select: { id: true, progressToken: true, status: true },
          }),
      },
      extra: (tx, id) =>
        tx.jobEvent.create({ data: { jobId: id, type: "reask", attempt: 0, message } }).then(() => undefined),
    });
    if (created.existing)
      return {
        type: "refused",
        status: 409,
        code: "reask_open",
        message: `Rows of this import are being asked again already (job ${created.existing.id}, ${created.existing.status}): wait for it to end.`,
      };
    return { type: "reasked", jobId: created.jobId, sourceJobId: jobId, plan, message };
  } catch (err) {
    if (!(err instanceof EnqueueFailed)) throw err;
    return {
      type: "queue_unavailable",
      message: "The job queue is unavailable; nothing was started. Try again in a minute.",
    };
  }
}

/** Rows asked again, each earlier answer beside the new one, as the job pages show them. */
export interface ReaskComparison {
  /** Rows asked again in all, and how many of them got another category. */
  total: number;
  changed: number;
  /** By row (a row asked again twice: the latest first), at most `limit`. */
  rows: {
    row: number;
    reaskJobId: string;
    previousSlug: string | null;
    previousModel: string | null;
    slug: string;
    model: string;
    provider: string;
    at: Date;
  }[];
}

/** An import's rows asked again (`of: "import"`), or a re-ask job's own (`of: "reask"`). */
export async function reaskComparison(jobId: string, of: "import" | "reask", limit = 50): Promise<ReaskComparison> {
  const where = of === "import" ? { sourceJobId: jobId } : { jobId };
  const [total, changedRows, rows] = await Promise.all([
    db().categoryReask.count({ where }),
    of === "import"
      ? db().$queryRaw<{ n: bigint }[]>`
          SELECT count(*) AS n FROM "CategoryReask" WHERE "sourceJobId" = ${jobId}::uuid AND slug IS DISTINCT FROM "previousSlug"`
      : db().$queryRaw<{ n: bigint }[]>`
          SELECT count(*) AS n FROM "CategoryReask" WHERE "jobId" = ${jobId}::uuid AND slug IS DISTINCT FROM "previousSlug"`,
    db().categoryReask.findMany({ where, orderBy: [{ row: "asc" }, { createdAt: "desc" }], take: limit }),
  ]);
  return {
    total,
    changed: Number(changedRows[0]?.n ?? 0),
    rows: rows.map((r) => ({
      row: r.row,
      reaskJobId: r.jobId,
      previousSlug: r.previousSlug,
      previousModel: r.previousModel,
      slug: r.slug,
      model: r.model,
      provider: r.provider,
      at: r.createdAt,
    })),
  };
}

/** The import a re-ask job asks rows of, and the provider it asks, from its row; null for another kind. */
export async function reaskOf(jobId: string): Promise<Pick<ReaskParams, "sourceJobId" | "provider" | "rows"> | null> {
  const job = await db().job.findUnique({ where: { id: jobId }, select: { kind: true, params: true } });
  if (job?.kind !== "category_reask") return null;
  const parsed = reaskParamsSchema.safeParse(job.params);
  return parsed.success
    ? { sourceJobId: parsed.data.sourceJobId, provider: parsed.data.provider, rows: parsed.data.rows }
    : null;
}

import { randomBytes } from "node:crypto";
import type { Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import type { JobKind } from "@/lib/catalog/catalog";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { logger } from "@/lib/log";
import { startAttempt } from "@/lib/runs/attempt";
import type { ItemLoop } from "@/lib/runs/for-each-item";

/**
 * A Job row for runtime tests, with a budget set as an operator would (so the worker keeps it
 * instead of resolving its own). Budgets are production milliseconds.
 */
export async function makeJob(
  tenantSlug: string,
  opts: { kind?: JobKind; queue?: string; total?: number; softMs: number; hardMs: number },
) {
  const tenant = { id: await ensureTenant(tenantSlug) };
  return db().job.create({
    data: {
      kind: opts.kind ?? "csv_import",
      queue: opts.queue ?? "imports",
      tenantId: tenant.id,
      total: opts.total ?? null,
      budgetSoftMs: opts.softMs,
      budgetHardMs: opts.hardMs,
      budgetSource: "operator:test",
      progressToken: randomBytes(16).toString("hex"),
    },
    select: { id: true, tenantId: true },
  });
}

/** What a BullMQ worker hands the runtime. */
export const queueJobFor = (jobId: string, queueName = "imports", name = "csv_import") =>
  ({ id: jobId, name, queueName, data: { jobId } }) as unknown as QueueJob;

/**
 * A new job of `total` items under tenant `tenantSlug`, its first attempt started, and the
 * `forEachItem` loop of that attempt (cursor 0) — what the item-loop tests run their items on.
 */
export async function itemLoopOnNewJob(
  tenantSlug: string,
  opts: { total: number; concurrency: number; signal?: AbortSignal },
) {
  const { id, tenantId } = await makeJob(tenantSlug, { total: opts.total, softMs: 600_000, hardMs: 900_000 });
  const run = (await startAttempt(id))!;
  const loop: ItemLoop = {
    jobId: id,
    attempt: run.attempt,
    cursor: 0,
    concurrency: opts.concurrency,
    signal: opts.signal ?? new AbortController().signal,
    log: logger("test"),
  };
  return { id, tenantId, loop };
}

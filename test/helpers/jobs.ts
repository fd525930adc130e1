import { randomBytes } from "node:crypto";
import type { Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import type { JobKind } from "@/lib/catalog/catalog";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";

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

import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import type { Described } from "@/lib/http/operator";
import { REASK_ROWS, reaskRows, type ReaskResult } from "@/lib/reasks/reask";
import { describeReask } from "@/lib/reasks/reask-messages";
import { retryJob, type RetryResult } from "./retry";
import { describeRetry } from "./retry-messages";

/**
 * `POST /api/jobs/<id>/retry`'s body: `{}` or `{ "budgetSoftS": 1200 }` retries the job from its
 * cursor (./retry.ts); `{ "route": "<provider>", "rows": "fallback" | "failed" | "all" }` asks an
 * import's rows again on that provider (lib/reasks), as a job of its own with its own budget.
 */
export const retryBodySchema = z
  .object({
    budgetSoftS: z.coerce.number().positive().max(86_400).optional(),
    route: z.string().trim().min(1, "route names a model provider, as primary").max(40).optional(),
    rows: z.enum(REASK_ROWS, { error: `rows is one of ${REASK_ROWS.join(", ")}` }).optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (body.rows !== undefined && body.route === undefined)
      ctx.addIssue({ code: "custom", path: ["route"], message: "rows needs a route: the provider to ask them on" });
    if (body.route !== undefined && body.budgetSoftS !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["budgetSoftS"],
        message: "a re-ask (route) runs as a job of its own with its own budget: send route and rows alone",
      });
  });
export type RetryBody = z.infer<typeof retryBodySchema>;

export type RetryOrReaskResult = { retry: RetryResult } | { reask: ReaskResult };

/** The body's retry or re-ask. */
export async function retryOrReask(jobId: string, by: Principal, body: RetryBody): Promise<RetryOrReaskResult> {
  if (body.route !== undefined) return { reask: await reaskRows(jobId, by, { route: body.route, rows: body.rows }) };
  return { retry: await retryJob(jobId, by, { budgetSoftS: body.budgetSoftS }) };
}

export function describeRetryOrReask(r: RetryOrReaskResult): Described {
  return "reask" in r ? describeReask(r.reask) : describeRetry(r.retry);
}

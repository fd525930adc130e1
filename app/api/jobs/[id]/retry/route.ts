import { audited } from "@/lib/audit/audited";
import { errorResponse, route } from "@/lib/http/api";
import { readJsonBody } from "@/lib/http/body";
import { retryJob, retryRequestSchema } from "@/lib/jobs/retry";
import { describeRetry } from "@/lib/jobs/retry-messages";

export const dynamic = "force-dynamic";

/** Operator: retry a job from its cursor (optionally with a larger budget). The API twin of the job page's Retry. */
export const POST = route<{ params: Promise<{ id: string }> }>(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request, { params }) => {
    const { id } = await params;
    const body = await readJsonBody(request, '{} or { "budgetSoftS": 1200 }');
    const parsed = retryRequestSchema.safeParse(body.ok ? body.value : undefined);
    const result = await audited("operator", { action: "job.retry", target: id, params: parsed.success ? parsed.data : { invalid: true } }, async (principal) => {
      if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
      const r = await retryJob(id, principal, parsed.data);
      const d = describeRetry(r);
      return { result: r.type === "retried" ? "ok" : "refused", message: d.message, value: r };
    });
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    const d = describeRetry(result!);
    if (result!.type !== "retried") return errorResponse(d.status, d.code, d.message);
    return Response.json({ ...result, message: d.message }, { status: d.status });
  },
  "POST /api/jobs/:id/retry",
);

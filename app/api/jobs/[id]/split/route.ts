import { audited } from "@/lib/audit/audited";
import { readJsonBody } from "@/lib/http/body";
import { errorResponse, route } from "@/lib/http/api";
import { splitJob, splitRequestSchema } from "@/lib/jobs/split";
import { describeSplit } from "@/lib/jobs/split-messages";

export const dynamic = "force-dynamic";

/** Operator: split a job's remaining items into parts (`{ parts? }`, 2–50). The API twin of the job page's Split. */
export const POST = route<{ params: Promise<{ id: string }> }>(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request, { params }) => {
    const { id } = await params;
    const body = await readJsonBody(request, '{} or { "parts": 8 }');
    const parsed = splitRequestSchema.safeParse(body.ok ? body.value : undefined);
    const result = await audited("operator", { action: "job.split", target: id, params: parsed.success ? { parts: parsed.data.parts ?? null } : { invalid: true } }, async (principal) => {
      if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
      const r = await splitJob(id, principal, parsed.data);
      return { result: r.type === "split" ? "ok" : "refused", message: describeSplit(r).message, value: r };
    });
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    const d = describeSplit(result!);
    if (result!.type !== "split") return errorResponse(d.status, d.code, d.message);
    return Response.json({ ...result, message: d.message }, { status: d.status });
  },
  "POST /api/jobs/:id/split",
);

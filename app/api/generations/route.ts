import { audited } from "@/lib/audit/audited";
import { errorResponse, route } from "@/lib/http/api";
import { readJsonBody } from "@/lib/http/body";
import { ApiError } from "@/lib/http/errors";
import { EnqueueFailed } from "@/lib/jobs/create";
import { QuotaRefused } from "@/lib/quota/errors";
import { createGeneration, generationRequestSchema } from "@/lib/quota/generations";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, adId, kind: "generate" |
 * "dislike" }` → 201 `{ jobId, progressToken, progressUrl }`. A request that cannot be served
 * now (another tenant's ad, no quota left, nothing to dislike, a dislike already running or
 * delivered) is refused with nothing created. Every call is audited.
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request) => {
    const body = await readJsonBody(request, '{ "tenant", "adId", "kind": "generate" | "dislike" }');
    const parsed = generationRequestSchema.safeParse(body.ok ? body.value : undefined);
    type Outcome = { type: "created"; jobId: string; progressToken: string } | { type: "refused"; err: QuotaRefused } | null;
    const outcome = await audited<Outcome>(
      "operator",
      { action: "generation.create", target: parsed.success ? parsed.data.adId : null, params: parsed.success ? parsed.data : { invalid: true } },
      async () => {
        if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
        try {
          const created = await createGeneration(parsed.data);
          return { result: "ok", message: `card_generation ${created.jobId} queued (${parsed.data.kind})`, value: { type: "created" as const, ...created } };
        } catch (err) {
          if (err instanceof QuotaRefused) return { result: "refused", message: `refused: ${err.message}`, value: { type: "refused" as const, err } };
          throw err;
        }
      },
    ).catch((err: unknown) => {
      if (err instanceof EnqueueFailed) throw new ApiError(503, "queue_unavailable", "The generation cannot be started right now (the job queue is unavailable). Nothing was saved; try again in a minute.");
      throw err;
    });
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    if (outcome!.type === "refused") {
      const { code } = outcome!.err;
      return errorResponse(code === "ad_not_found" ? 404 : 409, code, outcome!.err.message);
    }
    const progressUrl = `/progress/${outcome!.progressToken}`;
    return Response.json({ jobId: outcome!.jobId, progressToken: outcome!.progressToken, progressUrl }, { status: 201, headers: { Location: progressUrl } });
  },
  "POST /api/generations",
);

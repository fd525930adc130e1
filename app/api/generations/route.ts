import { operatorRoute } from "@/lib/http/operator";
import { describeJobStarted, describeQueueUnavailable, startOrQueueUnavailable } from "@/lib/jobs/start-outcome";
import { QuotaRefused } from "@/lib/quota/errors";
import { createGeneration, generationRequestSchema, type GenerationRequest } from "@/lib/generations/create-generation";

export const dynamic = "force-dynamic";

/** A generation start with the quota's refusal as a value too: nothing was created either way. */
async function startGeneration(input: GenerationRequest) {
  try {
    return await startOrQueueUnavailable(createGeneration(input));
  } catch (err) {
    if (err instanceof QuotaRefused) return { type: "refused" as const, refused: err };
    throw err;
  }
}

/**
 * Operator (what the product's own services call): JSON `{ tenant, adId, kind: "generate" |
 * "dislike" }` → 201 `{ jobId, progressToken, progressUrl }`. A request that cannot be served
 * now (another tenant's ad, no quota left, nothing to dislike, a dislike already running or
 * delivered) is refused with nothing created. Every call is audited.
 */
export const POST = operatorRoute({
  name: "POST /api/generations",
  action: "generation.create",
  input: { body: generationRequestSchema, example: '{ "tenant", "adId", "kind": "generate" | "dislike" }' },
  target: (input) => input?.adId ?? null,
  run: (input) => startGeneration(input),
  describe: (r, input) => {
    if (r.type === "queue_unavailable") return describeQueueUnavailable(r, "generation");
    if (r.type === "refused") {
      const { code, message } = r.refused;
      return { ok: false, status: code === "ad_not_found" ? 404 : 409, code, message, audit: `refused: ${message}` };
    }
    return describeJobStarted(r.started, `card_generation ${r.started.jobId} queued (${input.kind})`);
  },
});

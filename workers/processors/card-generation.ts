import { AttemptFenced, JobFailed } from "@/lib/core/signals";
import { QuotaRefused } from "@/lib/quota/errors";
import { generationParamsSchema } from "@/lib/generations/create-generation";
import { GENERATION_POLICY, WRITES } from "@/lib/catalog/generation-policy";
import { claim, heartbeatReserve, release, type Reserve } from "@/lib/quota/reserves";
import { reserveTimings } from "@/lib/quota/settings";
import { scaled } from "@/lib/time";
import type { Processor } from "@/lib/runs/processor";
import { createProviderClient, ProviderError, type ProviderClient } from "./card-generation-provider";

/** Real time a write transaction always gets, whatever the time scale (a database round trip does not shrink). */
const MIN_WRITE_MS = 5_000;

/**
 * `card_generation`: one paid image generation of an ad's card, under a quota reserve.
 *
 * claim a unit (a `dislike` also sets the ad's flag) → heartbeat the reserve while the
 * generation lives → render (submit + poll), download, QA check; a "defect" verdict starts a
 * silent regeneration, up to `GENERATION_POLICY.passes` passes (the last one is delivered without
 * QA) → write the image with the spend and the release, in one transaction fenced by the job's
 * attempt. Any failure releases the reserve as failed (the unit is refunded, the flag cleared).
 */
export function cardGenerationWith(provider: (log: Parameters<Processor>[0]["log"]) => ProviderClient): Processor {
  return async ({ run, signal, log }) => {
    const params = generationParamsSchema.safeParse(run.params);
    if (!params.success) throw new JobFailed("The generation request is incomplete (no ad or kind). Request it again.");
    const { adId, kind } = params.data;
    // The card is written, charged and counted in one transaction (cursor 1): a run that died
    // after it, before its row was finished, has nothing left to do — claiming again would pay twice.
    if (run.cursor >= 1)
      return {
        message: `The card of ad ${adId} was already delivered by an earlier run of this job; nothing was generated or charged again.`,
        result: { adId, kind, alreadyDelivered: true },
      };
    const started = Date.now();

    let reserve: Reserve;
    try {
      reserve = await claim({ tenantId: run.tenantId, kind, subject: adId, jobId: run.jobId });
    } catch (err) {
      if (err instanceof QuotaRefused) throw new JobFailed(`${err.message} Nothing was generated.`);
      throw err;
    }
    const reserveLog = log.child({ reserveId: reserve.id, adId, reserveKind: kind });

    // Proof of life for the sweeper, until the job's hard limit: past it the run is abandoned and
    // fenced, so its reserve may go stale and be swept (its release would then be a late one).
    const { heartbeatMs } = reserveTimings();
    const hardAt = started + scaled(run.budgetHardMs);
    let lost = false;
    const beat = setInterval(() => {
      if (Date.now() > hardAt) return clearInterval(beat);
      void heartbeatReserve(reserve).then(
        (alive) => {
          if (!alive && !lost) {
            lost = true;
            reserveLog.warn(
              "the reserve was taken back by the sweeper while the generation runs; its release will be late",
            );
          }
        },
        (err: unknown) => reserveLog.warn({ err }, "reserve heartbeat failed"),
      );
    }, heartbeatMs);

    try {
      const client = provider(reserveLog);
      let passes = 0;
      let image: Buffer | undefined;
      let providerId = "";
      for (let pass = 1; pass <= GENERATION_POLICY.passes; pass++) {
        passes = pass;
        providerId = await client.render(
          `Card image for ad ${adId}${kind === "dislike" ? " (a new take: the customer disliked the last one)" : ""}${pass > 1 ? `, pass ${pass}` : ""}`,
          signal,
        );
        image = await client.download(providerId, signal);
        if (pass === GENERATION_POLICY.passes) break;
        let verdict: "ok" | "defect";
        try {
          verdict = await client.qa(providerId, signal);
        } catch (err) {
          if (signal.aborted || !(err instanceof ProviderError)) throw err;
          // QA is a quality gate, not the product: an image QA cannot judge is delivered.
          reserveLog.warn({ error: err.message }, "QA check unavailable; delivering the image unchecked");
          break;
        }
        if (verdict === "ok") break;
        reserveLog.info({ pass }, "QA found a defect: regenerating");
      }

      signal.throwIfAborted();
      const bytes = image!;
      const result = await release(reserve, "succeeded", {
        timeoutMs: Math.max(scaled(WRITES.timeoutMs), MIN_WRITE_MS),
        effect: async (tx) => {
          const { count } = await tx.job.updateMany({
            where: { id: run.jobId, attempt: run.attempt, status: "running" },
            data: { processed: 1, cursor: 1, heartbeatAt: new Date() },
          });
          if (count === 0) throw new AttemptFenced(run.jobId, run.attempt);
          await tx.cardImage.create({
            data: {
              adId,
              jobId: run.jobId,
              reserveId: reserve.id,
              kind,
              passes,
              providerJobId: providerId,
              contentType: "image/png",
              sizeBytes: bytes.length,
              content: new Uint8Array(bytes),
            },
            select: { id: true },
          });
        },
      });
      clearInterval(beat);
      const charge =
        result.type === "late"
          ? result.resolution === "debt"
            ? " The pack was empty by then: it is recorded as a debt."
            : " Its reserve had been taken back meanwhile; it was charged again."
          : "";
      return {
        message: `Generated the card of ad ${adId}${passes > 1 ? ` in ${passes} passes (QA found a defect in the first)` : ""}.${charge}`,
        result: {
          adId,
          kind,
          passes,
          release: result.type,
          ...(result.type === "late" ? { resolution: result.resolution } : {}),
        },
      };
    } catch (err) {
      clearInterval(beat);
      // Nothing delivered: the unit goes back (the flag of a dislike too). The provider cannot be
      // cancelled, so a render still running there is simply never fetched.
      await release(reserve, "failed").catch((releaseErr: unknown) =>
        reserveLog.error({ err: releaseErr }, "could not release the reserve; the sweeper will take it back"),
      );
      if (err instanceof ProviderError)
        throw new JobFailed(
          `The card could not be generated: ${err.message}. The reserved unit was returned to the pack.`,
        );
      throw err;
    }
  };
}

export const cardGeneration: Processor = cardGenerationWith((log) => createProviderClient({ log }));

import type { z } from "zod";
import type { Logger } from "@/lib/log";
import { AttemptFenced, JobFailed } from "@/lib/core/signals";
import { QuotaRefused } from "@/lib/quota/errors";
import { generationParamsSchema } from "@/lib/generations/create-generation";
import { GENERATION_POLICY, WRITES } from "@/lib/catalog/generation-policy";
import { claim, heartbeatReserve, release, type ReleaseResult, type Reserve } from "@/lib/quota/reserves";
import { reserveTimings } from "@/lib/quota/settings";
import { scaled } from "@/lib/time";
import type { Processor, RunContext, RunResult } from "@/lib/runs/processor";
import { createProviderClient, ProviderError, type ProviderClient } from "./card-generation-provider";

/** Real time a write transaction always gets, whatever the time scale (a database round trip does not shrink). */
const MIN_WRITE_MS = 5_000;

type Run = RunContext["run"];

/** The card asked for: the ad and the kind of generation, from the job's params. */
type CardRequest = z.infer<typeof generationParamsSchema>;

/** What the passes made: the image to deliver, its render's id at the provider, and how many passes it took. */
interface GeneratedCard {
  image: Buffer;
  providerId: string;
  passes: number;
}

/** The card the job's params ask for; incomplete params fail the job. */
function requestOf(run: Run): CardRequest {
  const params = generationParamsSchema.safeParse(run.params);
  if (!params.success) throw new JobFailed("The generation request is incomplete (no ad or kind). Request it again.");
  return params.data;
}

/** Reserve: claims the unit the generation spends (a `dislike` also sets the ad's flag); a refusal fails the job. */
async function reserveUnit(run: Run, { adId, kind }: CardRequest): Promise<Reserve> {
  try {
    return await claim({ tenantId: run.tenantId, kind, subject: adId, jobId: run.jobId });
  } catch (err) {
    if (err instanceof QuotaRefused) throw new JobFailed(`${err.message} Nothing was generated.`);
    throw err;
  }
}

/** Heartbeats the reserve while the generation lives, until the job's hard limit; returns the timer to clear. */
function keepReserveAlive(reserve: Reserve, run: Run, started: number, log: Logger): NodeJS.Timeout {
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
          log.warn("the reserve was taken back by the sweeper while the generation runs; its release will be late");
        }
      },
      (err: unknown) => log.warn({ err }, "reserve heartbeat failed"),
    );
  }, heartbeatMs);
  return beat;
}

/** Submit and poll (the client's `render`): one pass's render of the card; resolves to the provider's id. */
function renderCard(client: ProviderClient, { adId, kind }: CardRequest, pass: number, signal: AbortSignal) {
  return client.render(
    `Card image for ad ${adId}${kind === "dislike" ? " (a new take: the customer disliked the last one)" : ""}${pass > 1 ? `, pass ${pass}` : ""}`,
    signal,
  );
}

/** Download: the image of a finished render. */
function downloadCard(client: ProviderClient, providerId: string, signal: AbortSignal): Promise<Buffer> {
  return client.download(providerId, signal);
}

/** QA: the provider's verdict on a render, or "unchecked" when the check is unavailable (the image is delivered). */
async function checkQuality(
  client: ProviderClient,
  providerId: string,
  signal: AbortSignal,
  log: Logger,
): Promise<"ok" | "defect" | "unchecked"> {
  try {
    return await client.qa(providerId, signal);
  } catch (err) {
    if (signal.aborted || !(err instanceof ProviderError)) throw err;
    // QA is a quality gate, not the product: an image QA cannot judge is delivered.
    log.warn({ error: err.message }, "QA check unavailable; delivering the image unchecked");
    return "unchecked";
  }
}

/** Render, download and QA, pass after pass, until QA passes the image or cannot judge it; the last pass skips QA. */
async function generateCard(
  client: ProviderClient,
  request: CardRequest,
  signal: AbortSignal,
  log: Logger,
): Promise<GeneratedCard> {
  let passes = 0;
  let image: Buffer | undefined;
  let providerId = "";
  for (let pass = 1; pass <= GENERATION_POLICY.passes; pass++) {
    passes = pass;
    providerId = await renderCard(client, request, pass, signal);
    image = await downloadCard(client, providerId, signal);
    if (pass === GENERATION_POLICY.passes) break;
    const verdict = await checkQuality(client, providerId, signal, log);
    if (verdict !== "defect") break;
    log.info({ pass }, "QA found a defect: regenerating");
  }
  return { image: image!, providerId, passes };
}

/** Write: the image, the job's progress, the spend and the release in one transaction, fenced by the job's attempt. */
function writeCard(
  run: Run,
  reserve: Reserve,
  { adId, kind }: CardRequest,
  card: GeneratedCard,
): Promise<ReleaseResult> {
  const { image: bytes, providerId, passes } = card;
  return release(reserve, "succeeded", {
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
}

/** The job's outcome once the card is written: what was generated and how its unit was charged. */
function delivered({ adId, kind }: CardRequest, passes: number, result: ReleaseResult): RunResult {
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
}

/** Gives the unit of a failed generation back (the flag of a dislike too); a release that fails is left to the sweeper. */
async function releaseFailed(reserve: Reserve, log: Logger): Promise<void> {
  await release(reserve, "failed").catch((releaseErr: unknown) =>
    log.error({ err: releaseErr }, "could not release the reserve; the sweeper will take it back"),
  );
}

/** The error a failed generation ends its run with: the provider's failure as a `JobFailed`, anything else unchanged. */
function failureOf(err: unknown): unknown {
  if (err instanceof ProviderError)
    return new JobFailed(
      `The card could not be generated: ${err.message}. The reserved unit was returned to the pack.`,
    );
  return err;
}

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
    const request = requestOf(run);
    const { adId, kind } = request;
    // The card is written, charged and counted in one transaction (cursor 1): a run that died
    // after it, before its row was finished, has nothing left to do — claiming again would pay twice.
    if (run.cursor >= 1)
      return {
        message: `The card of ad ${adId} was already delivered by an earlier run of this job; nothing was generated or charged again.`,
        result: { adId, kind, alreadyDelivered: true },
      };
    const started = Date.now();
    const reserve = await reserveUnit(run, request);
    const reserveLog = log.child({ reserveId: reserve.id, adId, reserveKind: kind });
    const beat = keepReserveAlive(reserve, run, started, reserveLog);
    try {
      const card = await generateCard(provider(reserveLog), request, signal, reserveLog);
      signal.throwIfAborted();
      const result = await writeCard(run, reserve, request, card);
      clearInterval(beat);
      return delivered(request, card.passes, result);
    } catch (err) {
      clearInterval(beat);
      // Nothing delivered: the unit goes back (the flag of a dislike too). The provider cannot be
      // cancelled, so a render still running there is simply never fetched.
      await releaseFailed(reserve, reserveLog);
      throw failureOf(err);
    }
  };
}

export const cardGeneration: Processor = cardGenerationWith((log) => createProviderClient({ log }));

/**
 * Why a claim was refused: expected, said to a person as the message. `code` is stable for
 * callers (the API maps it to a status; the processor to the job's message).
 */
export type QuotaRefusal =
  | { code: "no_pack"; tenant: string }
  | { code: "pack_empty"; tenant: string; size: number }
  | { code: "ad_not_found"; adId: string }
  | { code: "dislike_in_progress"; adId: string }
  | { code: "dislike_already_used"; adId: string }
  | { code: "nothing_to_dislike"; adId: string };

function refusalMessage(r: QuotaRefusal): string {
  switch (r.code) {
    case "no_pack":
      return "This tenant has no image generation pack: nothing can be generated until one is bought.";
    case "pack_empty":
      return `This tenant's image generation pack is used up (all ${r.size} generations are spent or running).`;
    case "ad_not_found":
      return `There is no ad ${r.adId} for this tenant.`;
    case "dislike_in_progress":
      return `A regeneration after a dislike of ad ${r.adId} is already running.`;
    case "dislike_already_used":
      return `The one free regeneration after a dislike of ad ${r.adId} was already delivered.`;
    case "nothing_to_dislike":
      return `Ad ${r.adId} has no generated card yet, so there is nothing to dislike.`;
  }
}

/** A claim the quota refused (see `QuotaRefusal`): nothing was taken, nothing was changed. */
export class QuotaRefused extends Error {
  override name = "QuotaRefused";
  constructor(readonly refusal: QuotaRefusal) {
    super(refusalMessage(refusal));
  }
  get code(): QuotaRefusal["code"] {
    return this.refusal.code;
  }
}

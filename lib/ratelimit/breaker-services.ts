/**
 * The outside services a circuit breaker guards (lib/ratelimit/breaker.ts) and the states it moves
 * through. Kept apart so that the metrics module can name them without importing the breaker.
 */

export const OUTSIDE_SERVICES = ["model", "ocr", "marketplace", "images"] as const;
export type OutsideService = (typeof OUTSIDE_SERVICES)[number];

/**
 * closed: calls go out; open: none does until the cool-down ends (the service failed, refused or
 * fell silent); misconfigured: the same, but because it refused who we are or what we asked for
 * (401, 403, 404 on the API path, an unknown model) — a person must fix the configuration, and a
 * probe after each cool-down sees when they did; half_open: one probe call decides.
 */
export const BREAKER_STATES = ["closed", "open", "misconfigured", "half_open"] as const;
export type BreakerState = (typeof BREAKER_STATES)[number];

/** The name a person reads: "the model service". */
export const SERVICE_NAMES: Record<OutsideService, string> = {
  model: "the model service",
  ocr: "the OCR service",
  marketplace: "the marketplace",
  images: "the image provider",
};

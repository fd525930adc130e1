import { modelServices, type ModelService } from "@/lib/model-providers";

/**
 * The outside services a circuit breaker guards (lib/ratelimit/breaker.ts) and the states it moves
 * through. Kept apart so that the metrics module can name them without importing the breaker.
 */

export const OUTSIDE_SERVICES = ["model", "ocr", "marketplace", "images"] as const;
/** What kind of service it is: its policies (silence thresholds, what a 404 means) follow from it. */
export type ServiceFamily = (typeof OUTSIDE_SERVICES)[number];
export type OutsideService = ServiceFamily | ModelService;

/** The family of a service: `model` for every model provider. */
export function familyOf(service: OutsideService): ServiceFamily {
  return service.startsWith("model:") ? "model" : (service as ServiceFamily);
}

/** The outside services of this configuration: the model providers (lib/model-providers.ts), then OCR, the marketplace and images. */
export function outsideServices(): OutsideService[] {
  return [...modelServices(), ...OUTSIDE_SERVICES.filter((s) => s !== "model")];
}

/** Whether a string names an outside service (a configured one or not). */
export function isOutsideService(value: string): value is OutsideService {
  return (OUTSIDE_SERVICES as readonly string[]).includes(value) || /^model:[a-z][a-z0-9]*$/.test(value);
}

/**
 * closed: calls go out; open: none does until the cool-down ends (the service failed, refused or
 * fell silent); misconfigured: the same, but because it refused who we are or what we asked for
 * (401, 403, 404 on the API path, an unknown model) — a person must fix the configuration, and a
 * probe after each cool-down sees when they did; half_open: one probe call decides.
 */
export const BREAKER_STATES = ["closed", "open", "misconfigured", "half_open"] as const;
export type BreakerState = (typeof BREAKER_STATES)[number];

/** The name a person reads: "the model service", "the model provider backup". */
export function serviceName(service: OutsideService): string {
  return service.startsWith("model:")
    ? `the model provider ${service.slice("model:".length)}`
    : SERVICE_NAMES[familyOf(service)];
}

/** The name a person reads of each family (`serviceName` for any service). */
export const SERVICE_NAMES: Record<ServiceFamily, string> = {
  model: "the model service",
  ocr: "the OCR service",
  marketplace: "the marketplace",
  images: "the image provider",
};

import { env, type Env } from "@/lib/env";
import type { Provider } from "@/lib/catalog/catalog";
import { modelRouting, providerOfService, type ModelService } from "@/lib/model-providers";
import { familyOf, isOutsideService } from "./breaker-services";
import { scaled } from "@/lib/time";

/**
 * The marketplace's per-tenant rate limits, one token bucket per endpoint family, in production
 * units. The limiter (Redis) and the marketplace simulator (in memory) both read these objects:
 * one source of truth, so the limiter and the service it protects never disagree.
 */
export interface BucketSpec {
  /** Tokens a full bucket holds: the burst allowed after an idle period. */
  capacity: number;
  /** Tokens added per window, continuously (not all at once at the window's end). */
  refillPerWindow: number;
  /** Production milliseconds; scaled by `BOUNDED_TIME_SCALE` where used. */
  windowMs: number;
  /** Why these numbers. */
  why: string;
}

export const BUCKETS = {
  statistics: {
    capacity: 1,
    refillPerWindow: 1,
    windowMs: 60_000,
    why: "the marketplace's statistics reports allow one request per minute per seller; a caller that loses the race for a token waits up to two windows (~125 s with margin)",
  },
  orders: {
    capacity: 10,
    refillPerWindow: 10,
    windowMs: 60_000,
    why: "the orders API allows 10 requests per minute per seller, and a burst of 10 after a quiet minute",
  },
  ads: {
    capacity: 5,
    refillPerWindow: 5,
    windowMs: 10_000,
    why: "the advertising API allows 5 requests per 10 s per seller (one every 2 s on average)",
  },
} as const satisfies Record<string, BucketSpec>;

export type Family = keyof typeof BUCKETS;
export const FAMILIES = Object.keys(BUCKETS) as Family[];

export function isFamily(value: string): value is Family {
  return Object.hasOwn(BUCKETS, value);
}

/** A tenant slug as it may appear in a scope: no `:`, no hash-tag braces, no whitespace. */
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

/** The rate-limit scope of one tenant's calls to one endpoint family: `"statistics:acme"`. */
export function scopeOf(family: Family, tenantSlug: string): string {
  if (!TENANT.test(tenantSlug))
    throw new RangeError(`not a tenant slug usable in a rate-limit scope: ${JSON.stringify(tenantSlug)}`);
  return `${family}:${tenantSlug}`;
}

export interface ParsedScope {
  family: Family;
  tenant: string;
  spec: BucketSpec;
}

/** The family, tenant and bucket spec of a scope, or null when it is not `family:tenant` with a known family. */
export function parseScope(scope: string): ParsedScope | null {
  const at = scope.indexOf(":");
  if (at < 0) return null;
  const family = scope.slice(0, at);
  const tenant = scope.slice(at + 1);
  if (!isFamily(family) || !TENANT.test(tenant)) return null;
  return { family, tenant, spec: BUCKETS[family] };
}

/** The outside services whose calls take a provider slot (lib/ratelimit/provider.ts): every model provider, and OCR. */
export const LIMITED_PROVIDERS = ["model", "ocr"] as const satisfies readonly Provider[];
export type LimitedProvider = "ocr" | ModelService;

export function isLimitedProvider(value: string): value is LimitedProvider {
  return value === "ocr" || (isOutsideService(value) && familyOf(value) === "model");
}

/** Every provider with slots in this configuration: the primary model provider, OCR, then the other model providers. */
export function limitedProviders(): LimitedProvider[] {
  return [...LIMITED_PROVIDERS, ...modelRouting().providers.flatMap((p) => (p.service === "model" ? [] : [p.service]))];
}

/** One provider's limits, shared by every worker process. */
export interface ProviderLimits {
  /** Calls in flight at once. */
  concurrency: number;
  /** Requests per production second (fractional allowed). */
  rps: number;
}

/** A provider's configured limits: `BOUNDED_PROVIDER_<PROVIDER>_CONCURRENCY` and `_RPS` (`BOUNDED_PROVIDER_MODEL_<NAME>_*` for another model provider). */
export function providerLimits(provider: LimitedProvider, e: Env = env()): ProviderLimits {
  if (provider === "ocr") return { concurrency: e.BOUNDED_PROVIDER_OCR_CONCURRENCY, rps: e.BOUNDED_PROVIDER_OCR_RPS };
  if (provider === "model")
    return { concurrency: e.BOUNDED_PROVIDER_MODEL_CONCURRENCY, rps: e.BOUNDED_PROVIDER_MODEL_RPS };
  // Another model provider: its own variables (lib/modelcalls/providers.ts); one no longer
  // configured (a scope left in Redis by an earlier configuration) gets an extra provider's defaults.
  const configured = providerOfService(provider);
  return configured ? { concurrency: configured.concurrency, rps: configured.rps } : { concurrency: 8, rps: 5 };
}

/**
 * The token bucket of a provider's request rate: `rps` tokens per production second, and a burst
 * of half a second's worth. A provider counts its quota in a bucket of its own that holds a whole
 * second's worth (as the simulators do); the half second left over absorbs requests that were
 * granted apart but reach it together (a slow TLS handshake, a busy event loop), where the
 * marketplace's buckets need a per-token margin because their burst is one or a few tokens.
 */
export function providerBucketSpec(
  provider: LimitedProvider,
  limits: ProviderLimits = providerLimits(provider),
): BucketSpec {
  return {
    capacity: Math.max(1, Math.ceil(limits.rps / 2)),
    refillPerWindow: limits.rps,
    windowMs: 1_000,
    why: `the ${provider} provider's quota of ${limits.rps} requests a second, shared by every worker; a burst of half a second's worth, so the provider's own one-second bucket is never emptied by requests that arrive bunched`,
  };
}

/** The rate-limit scope of a provider's calls: `"provider:model"`. */
export function providerScope(provider: LimitedProvider): string {
  return `provider:${provider}`;
}

/** The provider of a `provider:<name>` scope, or null for any other scope. */
export function parseProviderScope(scope: string): LimitedProvider | null {
  if (!scope.startsWith("provider:")) return null;
  const name = scope.slice("provider:".length);
  return isLimitedProvider(name) ? name : null;
}

/** A bucket in this process's time: what the limiter's Lua script and the simulator compute with. */
export interface BucketRate {
  capacity: number;
  /** Tokens per real millisecond. */
  refillPerMs: number;
  /** Real milliseconds between two tokens. */
  tokenIntervalMs: number;
}

/**
 * The spec in real milliseconds: `windowMs` scaled by `timeScale`, then `marginMs` (real ms)
 * added to each token's interval. The limiter asks for a margin because a granted request
 * reaches the service a little later, and two requests granted one interval apart may arrive
 * closer together than that; the service itself uses none.
 *
 * @param timeScale - @defaultValue `env().BOUNDED_TIME_SCALE`
 * @param marginMs - real milliseconds added to each token's interval. @defaultValue 0
 */
export function bucketRate(spec: BucketSpec, timeScale: number = env().BOUNDED_TIME_SCALE, marginMs = 0): BucketRate {
  // At least 1 ms per window, so a tiny time scale never divides by zero.
  const windowMs = Math.max(1, scaled(spec.windowMs, timeScale));
  const tokenIntervalMs = windowMs / spec.refillPerWindow + marginMs;
  return { capacity: spec.capacity, refillPerMs: 1 / tokenIntervalMs, tokenIntervalMs };
}

/**
 * Real (time-scaled) milliseconds in production units, for display: `ms / BOUNDED_TIME_SCALE`.
 * Every wait the limiter returns or throws is in real milliseconds.
 */
export function toProductionMs(ms: number, timeScale: number = env().BOUNDED_TIME_SCALE): number {
  return Math.round(ms / timeScale);
}

export { BUCKETS, FAMILIES, bucketRate, isFamily, parseScope, scopeOf, toProductionMs, type BucketRate, type BucketSpec, type Family, type ParsedScope } from "./buckets";
export { deferralThreshold, runWithRateLimitDeferral } from "./context";
export { RateLimitCapExceeded, RateLimitDefer, isRateLimitCapExceeded, isRateLimitDefer } from "./errors";
export {
  DEFER_THRESHOLD_MS,
  MARGIN_MS,
  MAX_WAIT_MS,
  REDIS_ERROR_RETRY_MS,
  acquire,
  bucketKey,
  createLimiter,
  deferThresholdMs,
  limiter,
  maxWaitMs,
  peekBucket,
  tryAcquire,
  waitForRateLimit,
  type AcquireOptions,
  type Acquired,
  type BucketState,
  type Limiter,
  type LimiterOptions,
  type TryAcquireResult,
} from "./limiter";

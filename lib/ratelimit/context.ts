import { AsyncLocalStorage } from "node:async_hooks";

/*
 * What the limiter learns from the job it runs in, carried by AsyncLocalStorage so that every
 * await inside the job sees it and two jobs running at once in one process never see each
 * other's: whether a long wait may be deferred (the deferral context), and whose call it is and
 * by when its job must end (the tenant context, for the provider slots' fair share and their
 * deadlines first).
 */

/**
 * The deferral context: code running inside `runWithRateLimitDeferral` is part of a job that can
 * be rescheduled, so `acquire` turns a long wait into a `RateLimitDefer` instead of sleeping in
 * the worker slot. Carried by AsyncLocalStorage, so every await inside `fn` sees the context and
 * two jobs running at the same time in one process never see each other's.
 */
interface DeferralContext {
  /** Real milliseconds (already time-scaled). */
  thresholdMs: number;
}

const storage = new AsyncLocalStorage<DeferralContext>();

/**
 * Runs `fn` in a deferral context: inside it, `acquire` sleeps through waits up to `thresholdMs`
 * and throws `RateLimitDefer` beyond. A nested call replaces the threshold for its own `fn` only.
 *
 * @param thresholdMs - real milliseconds (already time-scaled), e.g. `deferThresholdMs()`.
 */
export function runWithRateLimitDeferral<T>(thresholdMs: number, fn: () => Promise<T>): Promise<T> {
  if (!Number.isFinite(thresholdMs) || thresholdMs < 0)
    throw new RangeError(`deferral threshold must be a non-negative number of ms, got ${thresholdMs}`);
  return storage.run({ thresholdMs }, fn);
}

/** The current deferral threshold in real milliseconds, or undefined outside a deferral context. */
export function deferralThreshold(): number | undefined {
  return storage.getStore()?.thresholdMs;
}

interface TenantContext {
  tenantId: string;
  /** When the job's soft deadline passes (real ms since the epoch), if it has one. */
  deadlineAt: number | undefined;
}

const tenants = new AsyncLocalStorage<TenantContext>();

/**
 * Runs `fn` on behalf of `tenantId`: provider slots taken inside it count against that tenant's
 * fair share (lib/ratelimit/provider-slots.lua), and a call close to `deadlineAt` goes before the
 * others. A nested call names the tenant for its own `fn` only.
 *
 * @param tenantId - a tenant id or slug; never contains `|` (the holder ids' separator).
 * @param deadlineAt - the job's soft deadline, real ms since the epoch.
 */
export function runAsTenant<T>(tenantId: string, fn: () => Promise<T>, deadlineAt?: number): Promise<T> {
  if (tenantId === "" || tenantId.includes("|"))
    throw new RangeError(`a tenant id is not empty and has no "|", got ${JSON.stringify(tenantId)}`);
  return tenants.run({ tenantId, deadlineAt }, fn);
}

/** The tenant whose work is running, or undefined outside `runAsTenant`. */
export function currentTenant(): string | undefined {
  return tenants.getStore()?.tenantId;
}

/** The running job's soft deadline (real ms since the epoch), or undefined outside a job that has one. */
export function currentDeadline(): number | undefined {
  return tenants.getStore()?.deadlineAt;
}

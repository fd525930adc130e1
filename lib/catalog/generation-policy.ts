/**
 * The reservation policy's numbers, in one place. The image provider client and the
 * card_generation processor import these very objects for their timeouts, attempts and passes,
 * and `worstCaseMs` adds them up: the sweep window is checked against that sum, never against a
 * number copied from here. Everything is production milliseconds (scaled by BOUNDED_TIME_SCALE
 * where it is used).
 *
 * Pure: no environment, no database, so the catalog, the metrics and the pages can import it. It
 * sits next to the catalog, at the bottom, because the catalog sizes the generations queue's
 * budget from `worstCaseMs`.
 */

/** One phase of a generation: up to `attempts` tries, each given at most `attemptTimeoutMs`. */
export interface PhasePolicy {
  attemptTimeoutMs: number;
  attempts: number;
  /** Why these numbers. */
  why: string;
}

/**
 * Waiting for the provider's image: the first attempt submits the generation and polls until it
 * is ready; a second attempt keeps polling the same provider job (the provider has no cancel,
 * so a new submit would pay twice). Submitting happens inside the attempt's time.
 */
export const PROVIDER_POLL: PhasePolicy = {
  attemptTimeoutMs: 150_000,
  attempts: 2,
  why: "the provider renders in ~20–60 s with tails to ~2 min; 150 s per attempt covers the tail, a second attempt survives one lost or hung poll",
};

/** Fetching the finished image from the provider. */
export const PROVIDER_DOWNLOAD: PhasePolicy = {
  attemptTimeoutMs: 60_000,
  attempts: 2,
  why: "a few MB from the provider's storage take seconds; 60 s is a stalled transfer, retried once",
};

/** The QA check of a finished image ("ok" or "defect"). */
export const QA_CHECK: PhasePolicy = {
  attemptTimeoutMs: 45_000,
  attempts: 2,
  why: "the QA model answers in ~5–15 s; 45 s per attempt covers its tail, retried once; a QA that cannot answer lets the image through",
};

/**
 * Generation passes at most: the first one, then a silent regeneration after a QA "defect". The
 * last pass is delivered without another QA check (there is no pass left to act on its verdict).
 */
export const REGENERATION = {
  passes: 2,
  why: "one silent regeneration fixes most defects; a second would double the worst case for little gain",
} as const;

/** Writing the image, the spend and the release (one transaction). */
export const WRITES = {
  timeoutMs: 30_000,
  why: "one transaction of a few rows and a few MB of image; 30 s is a database in trouble, not a slow write",
} as const;

export interface GenerationPolicy {
  poll: PhasePolicy;
  download: PhasePolicy;
  qa: PhasePolicy;
  passes: number;
  writesMs: number;
}

/** The policy the provider client and the processor use. */
export const GENERATION_POLICY: GenerationPolicy = {
  poll: PROVIDER_POLL,
  download: PROVIDER_DOWNLOAD,
  qa: QA_CHECK,
  passes: REGENERATION.passes,
  writesMs: WRITES.timeoutMs,
};

/** One line of the worst-case arithmetic, as the /reserves page shows it. */
export interface WorstCaseTerm {
  name: string;
  /** Per attempt (or the whole step, for writes). */
  eachMs: number;
  attempts: number;
  /** How many times the step can happen in one generation. */
  times: number;
  totalMs: number;
  why: string;
}

/**
 * The longest a generation can hold its reserve: every pass polls and downloads with every
 * attempt timing out, every pass but the last is QA-checked with every attempt timing out, then
 * the writes. 2 × (2 × 150 s + 2 × 60 s) + 1 × 2 × 45 s + 30 s = 960 s for the defaults.
 */
export function worstCaseTerms(policy: GenerationPolicy = GENERATION_POLICY): WorstCaseTerm[] {
  const phase = (name: string, p: PhasePolicy, times: number): WorstCaseTerm => ({
    name,
    eachMs: p.attemptTimeoutMs,
    attempts: p.attempts,
    times,
    totalMs: p.attemptTimeoutMs * p.attempts * times,
    why: p.why,
  });
  return [
    phase("provider poll", policy.poll, policy.passes),
    phase("download", policy.download, policy.passes),
    phase("QA check", policy.qa, Math.max(0, policy.passes - 1)),
    { name: "writes", eachMs: policy.writesMs, attempts: 1, times: 1, totalMs: policy.writesMs, why: WRITES.why },
  ];
}

export function worstCaseMs(policy: GenerationPolicy = GENERATION_POLICY): number {
  return worstCaseTerms(policy).reduce((sum, t) => sum + t.totalMs, 0);
}

/** The sweeper's numbers (production time). */
export interface SweepPolicy {
  /** A reserve younger than this is never reclaimed. */
  windowMs: number;
  /** A reserve whose heartbeat is fresher than this is never reclaimed. */
  leaseMs: number;
  /** How often a live generation heartbeats its reserve. */
  heartbeatMs: number;
  /** How often the sweeper looks. */
  intervalMs: number;
  /** The window must be at least the worst case times this. */
  margin: number;
}

export const SWEEP_POLICY: SweepPolicy = {
  // Worst case 960 s × margin 1.5 = 1,440 s (24 min): 25 min is the next round number above it.
  // A generation that grows past it makes the workers refuse to start (see reservationProblems).
  windowMs: 25 * 60_000,
  // Four missed heartbeats: a slow database or a long pause of the event loop is not a death.
  leaseMs: 2 * 60_000,
  heartbeatMs: 30_000,
  // A minute late is harmless: a unit comes back within window + interval of its generation's death.
  intervalMs: 60_000,
  // The constants are timeouts, but time also goes to what they do not bound (connection set-up,
  // a pause of the event loop, clock skew between worker machines): half again as much covers it.
  margin: 1.5,
};

/** Why the sweep window is what it is, for the /reserves page. */
export const SWEEP_WINDOW_WHY =
  "at least the worst case of a generation times the margin, so a generation that can still finish is never taken for abandoned";

/** Something that makes the reservation policy unsafe, said in one line with both numbers. */
export class ReservationPolicyError extends Error {
  override name = "ReservationPolicyError";
}

const s = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/**
 * What is wrong with the policy: the sweep window shorter than the worst case × margin, a lease
 * that a couple of late heartbeats would break, or a `generations` budget that would cut a
 * generation short of its worst case. Empty when safe.
 */
export function reservationProblems(input: {
  policy?: GenerationPolicy;
  sweep?: SweepPolicy;
  /** Where `sweep.windowMs` came from, named in the message. @defaultValue "the default" */
  windowSource?: string;
  /** The soft budget of card_generation, when known. */
  budgetSoftMs?: number;
}): string[] {
  const policy = input.policy ?? GENERATION_POLICY;
  const sweep = input.sweep ?? SWEEP_POLICY;
  const worst = worstCaseMs(policy);
  const needed = worst * sweep.margin;
  const problems: string[] = [];
  if (sweep.windowMs < needed) {
    problems.push(
      `the reserve sweep window ${s(sweep.windowMs)} (${input.windowSource ?? "the default"}) is shorter than the worst case of a generation ${s(worst)} × margin ${sweep.margin} = ${s(needed)}: ` +
        `the sweeper would take reserves of generations that can still finish (raise BOUNDED_RESERVE_SWEEP_WINDOW_S to at least ${Math.ceil(needed / 1000)}, or shorten the generation's timeouts in lib/catalog/generation-policy.ts)`,
    );
  }
  if (sweep.leaseMs < 3 * sweep.heartbeatMs) {
    problems.push(
      `the reserve lease ${s(sweep.leaseMs)} is under three heartbeats of ${s(sweep.heartbeatMs)}: two late heartbeats would make a live generation look dead`,
    );
  }
  if (input.budgetSoftMs !== undefined && input.budgetSoftMs < worst) {
    problems.push(
      `the soft budget of card_generation ${s(input.budgetSoftMs)} is shorter than the worst case of a generation ${s(worst)}: generations would be cut before their own timeouts end them`,
    );
  }
  return problems;
}

import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { BatchPending, isControlSignal } from "@/lib/core/signals";
import { OutsideServiceDown } from "@/lib/ratelimit/errors";
import { kindSpec, reschedules } from "@/lib/catalog/catalog";
import { formatCount } from "@/lib/format/number";
import { formatDuration } from "@/lib/format/duration";
import { describeProjection, projectItems, SAFETY_FACTOR } from "@/lib/projection/projection";
import { nounOf } from "@/lib/jobs/messages";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { recordModelCall } from "@/lib/modelcalls/record";
import * as batchService from "@/lib/modelcalls/batch-service";
import type { BatchAnswer, BatchRequest, BatchState, BatchStatus } from "@/lib/modelcalls/batch-service";
import type { ChatMessage } from "@/lib/modelcalls/schemas";
import { sleep } from "@/lib/time";
import type { RunStart } from "./attempt";

/**
 * The batch lane: a job whose budget leaves room sends its items that still need the model to the
 * provider's Batch API (half the price of direct calls, answers within hours) and still ends by
 * its deadline.
 *
 * At the job's first run, before any item, `throughBatchLane` decides (`decideLane`): the batch
 * lane when the lane's turnaround (p95 of its own recent batches, `laneTurnaround`) plus the time
 * to finish every one of those items directly (the projection's, ÷ `SAFETY_FACTOR` for a slower
 * day) fits what is left of the budget. The decision and its arithmetic are a `lane` event on the
 * job's timeline either way. With the batch lane the items go as one batch (one request per item,
 * `custom_id` its row), the batch is written down (`JobBatch`: id, status, counts, expected by,
 * deadline and last moment), and the run gives its worker slot back (`BatchPending`, deferred the
 * reschedule policy's way: ./deferral.ts, ./reschedule.ts). Each wake-up looks at the batch once:
 * - completed: its answers are returned; the processor commits them through its item loop (each
 *   exactly once: the loop's cursor and `JobItem`), and asks the model directly for any it lacks;
 * - expired, failed or cancelled at the provider, or still running at the last moment (the
 *   deadline less the direct time, with the margin): the batch is cancelled, the answers it has
 *   (partial output) are returned, and the rest is finished directly — "finishing directly";
 * - otherwise the slot goes back again until the next look (`POLL_MS`, never past the last moment).
 * A run resumed after the batch ended (a crash, a slice, a rate-limit wait) reads the same answers
 * again from the batch's output: an answered item is never asked again. Their tokens are recorded
 * once, as one model call of lane `batch` (priced at the batch price).
 */

export type { BatchAnswer };

/** The provider's batch client (lib/modelcalls/batch-service.ts), passed in so the lane can be tested against any. */
export interface BatchService {
  submitBatch(
    requests: BatchRequest[],
    options: { signal?: AbortSignal; context?: Record<string, unknown> },
  ): Promise<BatchState>;
  getBatch(id: string, options?: { signal?: AbortSignal }): Promise<BatchState>;
  cancelBatch(id: string, options?: { signal?: AbortSignal }): Promise<BatchState>;
  batchAnswers(state: BatchState, options?: { signal?: AbortSignal }): Promise<Map<string, BatchAnswer>>;
  findBatch(key: string, value: string, options?: { signal?: AbortSignal }): Promise<BatchState | null>;
}
/**
 * The lane's turnaround until enough batches were measured, production ms: 1 h. Providers promise
 * a batch within 24 h and most finish within the hour; a job that cannot wait an hour plus its
 * direct time runs directly until measured batches say the lane is faster.
 */
export const DEFAULT_TURNAROUND_MS = 3_600_000;
/** Fewer completed batches than this in the window: the default turnaround applies. */
export const MIN_BATCHES_MEASURED = 5;
/** Batches completed in the last this many days measure the turnaround. */
export const TURNAROUND_WINDOW_DAYS = 7;
/** How often a waiting job looks at its batch, production ms (a few database and HTTP round trips each time). */
export const POLL_MS = 60_000;
/**
 * How long a cancelled batch is given to settle (`cancelling` → `cancelled`) and hand over the
 * answers it has, production ms: OpenAI says up to 10 minutes. The last moment leaves room for it.
 */
export const CANCEL_SETTLE_MS = 600_000;
/** How often a cancelled batch is looked at while it settles, production ms. */
const SETTLE_POLL_MS = 10_000;
/** The timeline event that states a job's lane decision. */
export const LANE_EVENT = "lane";

const ENDED: ReadonlySet<BatchStatus> = new Set(["completed", "expired", "failed", "cancelled"]);

/** Whether jobs of `kind` on `queue` may use the batch lane: the catalog allows it, the environment keeps it on, and the queue gives slots back. */
export function batchLaneOn(
  kind: string,
  queue: string,
  kinds: readonly string[] = env().BOUNDED_BATCH_LANE_KINDS,
): boolean {
  return kindSpec(kind)?.batchLane !== undefined && kinds.includes(kind) && reschedules(queue);
}

export interface Turnaround {
  /** Production ms. */
  ms: number;
  /** Completed batches it was measured from (0: the default). */
  measured: number;
}

/** The lane's turnaround: p95 of submit → done of the batches completed in the window, production ms; the default below `MIN_BATCHES_MEASURED`. */
export async function laneTurnaround(now = new Date()): Promise<Turnaround> {
  const since = new Date(now.getTime() - TURNAROUND_WINDOW_DAYS * 86_400_000);
  const [row] = await db().$queryRaw<{ p95: number | null; n: number }[]>`
    SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM ("endedAt" - "submittedAt")) * 1000)::float8 AS p95,
           count(*)::int AS n
    FROM "JobBatch" WHERE status = 'completed' AND "endedAt" >= ${since} AND "endedAt" <= ${now}`;
  if (!row || row.n < MIN_BATCHES_MEASURED || row.p95 === null) return { ms: DEFAULT_TURNAROUND_MS, measured: 0 };
  return { ms: row.p95 / env().BOUNDED_TIME_SCALE, measured: row.n };
}

export interface LaneInput {
  kind: string;
  /** Items that still need the model. */
  items: number;
  /** Production ms of the budget left. */
  remainingMs: number;
  /** Production ms the projection gives those items directly, and its words. */
  directMs: number;
  directWords: string;
  turnaround: Turnaround;
  now: Date;
  timeScale: number;
}

export type LaneDecision =
  | {
      lane: "batch";
      text: string;
      expectedBy: Date;
      deadlineAt: Date;
      lastMomentAt: Date;
    }
  | { lane: "direct"; text: string };

const clock = (d: Date) => `${d.toISOString().slice(11, 19)} UTC`;

/**
 * The decision, pure: the batch lane when turnaround + a cancel's settling + direct time ÷
 * `SAFETY_FACTOR` fits the budget left. The deadline is now + the budget left (wall clock), the
 * last moment the deadline less the direct time with its margin and the settling, and the batch is
 * expected by now + turnaround.
 */
export function decideLane(input: LaneInput): LaneDecision {
  const { items, remainingMs, directMs, turnaround, now, timeScale } = input;
  const noun = nounOf(input.kind);
  // From the last moment: cancel the batch and let it settle, then finish directly with the margin.
  const finishMs = CANCEL_SETTLE_MS + directMs / SAFETY_FACTOR;
  const sum = `the batch service's turnaround ${formatDuration(turnaround.ms)} (${basisOf(turnaround)}) + ${formatDuration(finishMs)} to stop it and finish directly (${formatDuration(CANCEL_SETTLE_MS)} for a cancel to settle + ${input.directWords} ÷ ${SAFETY_FACTOR}) = ${formatDuration(turnaround.ms + finishMs)}`;
  if (items === 0) return { lane: "direct", text: `Direct lane: no ${noun} needs the model.` };
  if (turnaround.ms + finishMs > remainingMs)
    return {
      lane: "direct",
      text: `Direct lane: ${sum}, more than the ${formatDuration(remainingMs)} left of the budget.`,
    };
  const at = (ms: number) => new Date(now.getTime() + ms * timeScale);
  const deadlineAt = at(remainingMs);
  const lastMomentAt = at(remainingMs - finishMs);
  const expectedBy = at(turnaround.ms);
  return {
    lane: "batch",
    expectedBy,
    deadlineAt,
    lastMomentAt,
    text: `Batch lane: ${formatCount(items)} ${noun}${items === 1 ? "" : "s"} to the provider's batch service: ${sum}, within the ${formatDuration(remainingMs)} left of the budget. Expected by ${clock(expectedBy)}; last moment to finish directly ${clock(lastMomentAt)}; deadline ${clock(deadlineAt)}.`,
  };
}

/**
 * The decision before the rows are read: direct when the budget left cannot hold even the lane's
 * turnaround and a cancel's settling (no batch fits, whatever the rows); null when it takes the
 * rows to tell. A big import's file is then not parsed a second time at its start for nothing.
 */
export function decideWithoutItems(input: Pick<LaneInput, "remainingMs" | "turnaround">): LaneDecision | null {
  const { remainingMs, turnaround } = input;
  if (turnaround.ms + CANCEL_SETTLE_MS <= remainingMs) return null;
  return {
    lane: "direct",
    text: `Direct lane: the batch service's turnaround ${formatDuration(turnaround.ms)} (${basisOf(turnaround)}) + ${formatDuration(CANCEL_SETTLE_MS)} for a cancel to settle = ${formatDuration(turnaround.ms + CANCEL_SETTLE_MS)}, more than the ${formatDuration(remainingMs)} left of the budget.`,
  };
}

const basisOf = (turnaround: Turnaround) =>
  turnaround.measured > 0
    ? `p95 of ${formatCount(turnaround.measured)} batches in the last ${TURNAROUND_WINDOW_DAYS} days`
    : `the default until ${MIN_BATCHES_MEASURED} batches are measured`;

/** One item that still needs the model: its row (the `custom_id`) and the prompt the direct path would send. */
export interface LaneItem {
  row: number;
  messages: ChatMessage[];
}

export interface BatchLaneInput {
  run: RunStart;
  signal: AbortSignal;
  log: Logger;
  service: BatchService;
  /** The items that still need the model (not committed, not answered otherwise), read only when deciding. */
  items: () => Promise<LaneItem[]>;
  /** The model's name, for the cost record. */
  model: string;
  now?: () => Date;
}

export const customIdOf = (row: number) => `row-${row}`;
const rowOf = (customId: string) => (/^row-(\d+)$/.exec(customId) ? Number(customId.slice(4)) : null);

/**
 * The batch lane for one run (see the module): the answers the job's batch has, by row — empty
 * when the job runs directly. Throws `BatchPending` while the batch is not done and the last
 * moment is not reached.
 */
export async function throughBatchLane(input: BatchLaneInput): Promise<Map<number, BatchAnswer>> {
  const { run } = input;
  const batch = await db().jobBatch.findUnique({ where: { jobId: run.jobId } });
  if (batch) return follow(input, batch);
  if (!batchLaneOn(run.kind, run.queue) || run.parentId !== null) return new Map();
  // Decided once, at the job's start: a resumed run keeps the lane its job took.
  const decided = await db().jobEvent.count({ where: { jobId: run.jobId, type: LANE_EVENT } });
  if (decided > 0) return new Map();
  await start(input);
  return new Map();
}

/** The `lane` event of this run that states `message`. */
function laneEventOf(run: RunStart, message: string) {
  return { jobId: run.jobId, type: LANE_EVENT, attempt: run.attempt, message };
}

/** The job's batch: one an earlier run submitted, taken up, or a new one; null once it went direct after all. */
async function submitOrTakeUp(input: BatchLaneInput, items: LaneItem[], decided: string): Promise<BatchState | null> {
  const { run, log, service, signal } = input;
  // A batch this job submitted and could not write down (its process stopped between the two) is
  // taken up again, never sent and paid for twice.
  const own = await ownBatch(input);
  if (own) {
    log.warn({ batchId: own.id }, "took up the batch an earlier run of this job submitted");
    return own;
  }
  try {
    return await service.submitBatch(
      items.map((item) => ({ customId: customIdOf(item.row), messages: item.messages })),
      { signal, context: { queue: run.queue, jobKind: run.kind, jobId: run.jobId } },
    );
  } catch (err) {
    // The job's own stop (deadline, cancel, shutdown) or an outage the run waits out goes on up,
    // with nothing written: the next run decides again (and takes up a batch that was created).
    if (signal.aborted || isControlSignal(err)) throw err;
    // A create whose answer was lost (no status: a timeout, a dropped connection) may have made
    // the batch all the same; one the provider refused did not.
    const answered = err instanceof ModelCallError && err.status !== undefined;
    const state = answered ? null : await ownBatch(input);
    if (!state) await directAfterAll(input, decided, err);
    return state;
  }
}

/** Writes the decision and the batch together (one transaction): a job with a lane event has its batch. */
async function recordBatch(
  run: RunStart,
  decision: Extract<LaneDecision, { lane: "batch" }>,
  state: BatchState,
  rows: number,
  now: Date,
): Promise<void> {
  await db().$transaction([
    db().jobEvent.create({ data: laneEventOf(run, decision.text) }),
    db().jobBatch.create({
      data: {
        jobId: run.jobId,
        batchId: state.id,
        status: state.status,
        rows,
        completed: state.completed,
        failed: state.failed,
        submittedAt: now,
        expectedBy: decision.expectedBy,
        deadlineAt: decision.deadlineAt,
        lastMomentAt: decision.lastMomentAt,
        decision: decision.text,
      },
    }),
  ]);
}

/** Decides the job's lane at its first run: a `lane` event when direct; else the batch sent, written down, and the slot given back. */
async function start(input: BatchLaneInput): Promise<void> {
  const { run, log } = input;
  const now = input.now?.() ?? new Date();
  const scale = env().BOUNDED_TIME_SCALE;
  // The budget left: less the slot time earlier runs used (this run has only just started).
  const remainingMs = Math.max(0, run.budgetSoftMs - run.slotMsUsed);
  const turnaround = await laneTurnaround(now);
  const early = decideWithoutItems({ remainingMs, turnaround });
  if (early) {
    log.info({ lane: early.lane }, early.text);
    await db().jobEvent.create({ data: laneEventOf(run, early.text) });
    metrics.batchLaneDecided.inc({ kind: run.kind, lane: "direct" });
    return;
  }
  const items = await input.items();
  const projection = await projectItems(run.kind, items.length, now, { jobId: run.jobId });
  const decision = decideLane({
    kind: run.kind,
    items: items.length,
    remainingMs,
    directMs: projection?.ms ?? Infinity,
    directWords: projection ? describeProjection(projection) : "not projected",
    turnaround,
    now,
    timeScale: scale,
  });
  log.info({ lane: decision.lane, items: items.length }, decision.text);
  if (decision.lane === "direct") {
    await db().jobEvent.create({ data: laneEventOf(run, decision.text) });
    metrics.batchLaneDecided.inc({ kind: run.kind, lane: "direct" });
    return;
  }
  const state = await submitOrTakeUp(input, items, decision.text);
  if (!state) return;
  metrics.batchLaneDecided.inc({ kind: run.kind, lane: "batch" });
  await recordBatch(run, decision, state, items.length, now);
  log.info({ batchId: state.id, rows: items.length }, "rows sent to the provider's batch service");
  throw pending(state.id, decision.expectedBy, decision.lastMomentAt, now);
}

/**
 * No batch service there (a provider without one answers 404), or it refused this batch: the rows
 * run directly, as they would have without the lane.
 */
async function directAfterAll(input: BatchLaneInput, decided: string, err: unknown): Promise<void> {
  const { run, log } = input;
  const text = `Direct lane after all: the provider's batch service did not take the batch (${err instanceof Error ? err.message : String(err)}).`;
  const event = (message: string) => ({ jobId: run.jobId, type: LANE_EVENT, attempt: run.attempt, message });
  await db().jobEvent.createMany({ data: [event(decided), event(text)] });
  log.warn({ err }, text);
  metrics.batchLaneDecided.inc({ kind: run.kind, lane: "direct" });
}

/** Statuses of a batch worth taking up: still running, or done with its answers. */
const ADOPTABLE: ReadonlySet<BatchStatus> = new Set(["validating", "in_progress", "finalizing", "completed"]);

/**
 * The batch the provider holds for this job (its metadata names the job) and that can still
 * answer, or null. A provider that cannot list its batches is no reason to stop: null.
 */
async function ownBatch(input: BatchLaneInput): Promise<BatchState | null> {
  const { run, service, signal, log } = input;
  try {
    const found = await service.findBatch("jobId", run.jobId, { signal });
    return found && ADOPTABLE.has(found.status) ? found : null;
  } catch (err) {
    if (signal.aborted || isControlSignal(err)) throw err;
    log.warn({ err }, "could not list the provider's batches to look for this job's own");
    return null;
  }
}

/** Gives the slot back until the next look: `POLL_MS` from now, never past the last moment. */
function pending(batchId: string, expectedBy: Date, lastMomentAt: Date, now: Date): BatchPending {
  const poll = POLL_MS * env().BOUNDED_TIME_SCALE;
  const wait = Math.max(1, Math.min(poll, lastMomentAt.getTime() - now.getTime()));
  return new BatchPending(wait, batchId, expectedBy, lastMomentAt);
}

type JobBatchRow = NonNullable<Awaited<ReturnType<ReturnType<typeof db>["jobBatch"]["findUnique"]>>>;

async function follow(input: BatchLaneInput, batch: JobBatchRow): Promise<Map<number, BatchAnswer>> {
  const { service, signal, log } = input;
  const now = input.now?.() ?? new Date();
  let state: BatchState;
  try {
    state = await service.getBatch(batch.batchId, { signal });
  } catch (err) {
    if (signal.aborted || isControlSignal(err)) throw err;
    // An ended batch the provider no longer has (or will not show): its rows are asked directly.
    if (batch.endedAt) {
      log.warn({ err, batchId: batch.batchId }, "could not read the ended batch again; its rows are asked directly");
      return new Map();
    }
    // The batch service did not answer this look: look again later, or past the last moment
    // finish directly without its answers.
    if (now < batch.lastMomentAt) {
      log.warn({ err, batchId: batch.batchId }, "could not look at the batch; looking again later");
      throw pending(batch.batchId, batch.expectedBy, batch.lastMomentAt, now);
    }
    const fallback = "the batch service did not answer at the last moment";
    await db().jobBatch.update({ where: { jobId: batch.jobId }, data: { endedAt: now, fallback } });
    metrics.batchEnded.inc({ kind: input.run.kind, outcome: "unanswered" });
    log.warn({ err, batchId: batch.batchId }, `${fallback}: finishing directly`);
    return new Map();
  }
  if (!batch.endedAt) {
    let fallback: string | null = null;
    let outcome: "completed" | "expired" | "failed" | "cancelled" | "last_moment" = "completed";
    if (state.status === "completed") fallback = null;
    else if (ENDED.has(state.status)) {
      fallback = `the batch ended ${state.status} at the provider`;
      outcome = state.status as "expired" | "failed" | "cancelled";
    } else if (now >= batch.lastMomentAt) {
      fallback = "the batch was not done by the last moment";
      outcome = "last_moment";
      state = await cancelAndSettle(input, state);
    } else {
      await saveState(batch.jobId, state, null, null);
      throw pending(batch.batchId, batch.expectedBy, batch.lastMomentAt, now);
    }
    await saveState(batch.jobId, state, now, fallback);
    metrics.batchEnded.inc({ kind: input.run.kind, outcome });
    if (fallback) log.warn({ batchId: batch.batchId, status: state.status }, `${fallback}: finishing directly`);
    else log.info({ batchId: batch.batchId, completed: state.completed }, "batch completed");
  }
  let byId = new Map<string, BatchAnswer>();
  try {
    if (state.outputFileId) byId = await service.batchAnswers(state, { signal });
  } catch (err) {
    if (signal.aborted || isControlSignal(err)) throw err;
    // Answers that cannot be read are no answers: those rows are asked directly, by the deadline.
    log.warn({ err, batchId: batch.batchId }, "could not read the batch's answers; its rows are asked directly");
  }
  const answers = new Map<number, BatchAnswer>();
  for (const [customId, answer] of byId) {
    const row = rowOf(customId);
    if (row !== null) answers.set(row, answer);
  }
  await recordCostOnce(input, batch, answers, now);
  return answers;
}

/**
 * Cancels the batch and waits (a little) for the provider to settle it, so the answers it has are
 * in its output. A batch service that will not cancel or answer now does not stop the job: it goes
 * on with the state last seen (the answers that state's output holds, else none) and finishes
 * directly, which needs no batch service.
 */
async function cancelAndSettle(input: BatchLaneInput, state: BatchState): Promise<BatchState> {
  const { service, signal, log } = input;
  const scale = env().BOUNDED_TIME_SCALE;
  let current = state;
  try {
    current = await service.cancelBatch(state.id, { signal });
    const until = Date.now() + CANCEL_SETTLE_MS * scale;
    while (!ENDED.has(current.status) && Date.now() < until) {
      await sleep(Math.max(20, SETTLE_POLL_MS * scale), signal);
      current = await service.getBatch(state.id, { signal });
    }
  } catch (err) {
    // Batch calls share the model's breaker: failed cancels may open it. Then the direct finish
    // waits for the model service like any outage, with the batch written down as ended, never
    // cancelled again. Only the run's own end (its signal) stops here.
    if (signal.aborted || (isControlSignal(err) && !(err instanceof OutsideServiceDown))) throw err;
    log.warn({ err, batchId: state.id }, "could not cancel the batch or see it settle; finishing directly");
  }
  return current;
}

async function saveState(jobId: string, state: BatchState, endedAt: Date | null, fallback: string | null) {
  await db().jobBatch.update({
    where: { jobId },
    data: {
      status: state.status,
      completed: state.completed,
      failed: state.failed,
      ...(endedAt ? { endedAt, fallback } : {}),
    },
  });
}

/** The answers' tokens, once per batch: one model call of lane `batch` answering that many rows. */
async function recordCostOnce(
  input: BatchLaneInput,
  batch: JobBatchRow,
  answers: Map<number, BatchAnswer>,
  now: Date,
): Promise<void> {
  if (batch.costRecordedAt || answers.size === 0) return;
  const claimed = await db().jobBatch.updateMany({
    where: { jobId: batch.jobId, costRecordedAt: null },
    data: { costRecordedAt: now },
  });
  if (claimed.count === 0) return;
  let promptTokens = 0;
  let completionTokens = 0;
  for (const a of answers.values()) {
    promptTokens += a.promptTokens;
    completionTokens += a.completionTokens;
  }
  await recordModelCall({
    type: "batch",
    lane: "batch",
    queue: input.run.queue,
    jobKind: input.run.kind,
    jobId: input.run.jobId,
    model: input.model,
    startedAt: batch.submittedAt,
    durationMs: now.getTime() - batch.submittedAt.getTime(),
    outcome: "ok",
    batchSize: answers.size,
    promptTokens,
    completionTokens,
  });
}

/** What the job page shows of a job's lane: the decision(s) in words, and its batch when it took the batch lane. */
export interface JobLane {
  decisions: { at: Date; message: string }[];
  batch: {
    batchId: string;
    status: string;
    rows: number;
    completed: number;
    failed: number;
    submittedAt: Date;
    expectedBy: Date;
    lastMomentAt: Date;
    deadlineAt: Date;
    endedAt: Date | null;
    fallback: string | null;
  } | null;
}

/** The job's lane for its page; null when no lane was decided (a kind without the batch lane, or a job decided before it existed). */
export async function getJobLane(jobId: string): Promise<JobLane | null> {
  const [decisions, batch] = await Promise.all([
    db().jobEvent.findMany({
      where: { jobId, type: LANE_EVENT },
      select: { at: true, message: true },
      orderBy: { at: "asc" },
    }),
    db().jobBatch.findUnique({
      where: { jobId },
      select: {
        batchId: true,
        status: true,
        rows: true,
        completed: true,
        failed: true,
        submittedAt: true,
        expectedBy: true,
        lastMomentAt: true,
        deadlineAt: true,
        endedAt: true,
        fallback: true,
      },
    }),
  ]);
  return decisions.length === 0 && !batch ? null : { decisions, batch };
}

/**
 * A job cancelled while its rows are with the batch service: its batch is cancelled at the
 * provider too (the answers would be paid for and never used) and written down as ended. Never
 * throws: the job is cancelled whatever the provider answers; a batch it could not cancel is logged.
 */
export async function cancelOpenBatch(jobId: string, log: Logger, service: BatchService = batchService): Promise<void> {
  try {
    const batch = await db().jobBatch.findUnique({ where: { jobId }, select: { batchId: true, endedAt: true } });
    if (!batch || batch.endedAt) return;
    const state = await service.cancelBatch(batch.batchId);
    await db().jobBatch.update({
      where: { jobId },
      data: {
        status: state.status,
        completed: state.completed,
        failed: state.failed,
        endedAt: new Date(),
        fallback: "the job was cancelled",
      },
    });
    log.info({ jobId, batchId: batch.batchId, status: state.status }, "job cancelled: its batch was cancelled too");
  } catch (err) {
    log.warn({ err, jobId }, "job cancelled, but its batch at the provider could not be cancelled");
  }
}

import { setMaxListeners } from "node:events";
import { DependencyPause, whileUnavailable } from "@/lib/dependencies/pause";
import { isDependencyUnavailable } from "@/lib/dependencies/unavailable";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { isRateLimitDefer, type RateLimitDefer } from "@/lib/ratelimit/errors";
import { sleep } from "@/lib/time";
import { coalesce } from "@/lib/core/coalesce";
import { isControlSignal, SliceEnded } from "@/lib/core/signals";
import { ItemCosts } from "./item-costs";
import { itemFault, poisonReason } from "./item-fault";
import { commitItems, committedItems, type Effect, type ItemCommit } from "./commit";

/**
 * What one item did: a database effect committed with the job's advance (its own function, or its
 * part of a write grouped with the other items of the commit: ./commit.ts `groupedWrite`), or
 * nothing to write.
 */
export type ItemEffect = Effect | null;

export interface ItemLoop {
  jobId: string;
  /** The job kind, for the per-kind failure counter and the item cost rollup. */
  kind?: string;
  /** The job's queue, for the item cost rollup. */
  queue?: string;
  /** Items in flight at once. @defaultValue 1 (one after another) */
  concurrency?: number;
  attempt: number;
  /** Items already done by earlier attempts: those are skipped, not redone. */
  cursor: number;
  /**
   * For a part of a split job: the positions of the source batch this run covers (`from + 1 …
   * to`); the cursor then counts from `from`.
   */
  range?: { from: number; to: number /** The job it was split from. */; of?: string };
  /** For a part of a split job: the job it was split from, whose counts follow the part's. */
  parentId?: string | null;
  /**
   * Called once every item has been dispatched, while the last ones are still in flight (a part
   * of a split job starts the next part then, so the provider does not idle through its tail).
   * Must not throw; what it starts is its own.
   */
  onAllDispatched?: () => void;
  /**
   * The run's slice (`performance.now()` times). From `dispatchUntil`, once this run has committed
   * something, nothing new is dispatched and the items in flight may finish and commit until
   * `drainUntil`; those still going then are let go (their calls' answers are not waited for; the
   * items are not failures, and stay for the next attempt). Either way the loop ends with
   * `SliceEnded`, so the run hands the rest to a new attempt before its deadline. Undefined: the
   * loop runs until its items or its signal end.
   */
  slice?: { dispatchUntil: number; drainUntil: number };
  /**
   * Awaited before each dispatch: while it is pending nothing new starts and the items in flight
   * go on. The runtime holds dispatch from the soft limit until it has decided whether the
   * deadline is the job's own or its service's outage (./soft-limit.ts), so no item starts
   * after the deadline either way.
   */
  dispatchHold?: () => Promise<void>;
  signal: AbortSignal;
  log: Logger;
}

export interface ItemInfo {
  /** 1-based position of the item in the (source) batch. */
  index: number;
  /** The number a person sees for this item (a spreadsheet row, a file number). */
  row: number;
  signal: AbortSignal;
}

export interface PassSummary {
  processed: number;
  failed: number;
}

/**
 * The most items one commit takes. Items that finish while a commit is running wait for the next
 * one and go together: a job's commits take its row's lock one after another, so grouping is what
 * lets hundreds of items in flight commit as fast as they finish. A bound keeps one transaction
 * short (its effects run one after another inside it).
 */
const MAX_GROUP = 100;

/**
 * One committer per loop: items hand in what they did and wait until it is committed. Whatever is
 * waiting when a commit ends goes in the next one, together (lib/core/coalesce.ts). A group that
 * fails for another reason than a control signal is committed again item by item, so one item's
 * bad write fails only that item's commit. A commit that fails because PostgreSQL is not reachable
 * is nobody's failure: the committer waits for it (`pause`) and commits the group again, less the
 * items the lost commit did write before the connection went (the database says which), so each
 * item is still written exactly once.
 */
function groupCommitter(loop: ItemLoop, progress: Progress, pause: DependencyPause) {
  async function commit(group: ItemCommit[]): Promise<void> {
    let left = group;
    for (;;) {
      loop.signal.throwIfAborted();
      try {
        await commitItems(loop.jobId, loop.attempt, left, loop.parentId, progress.cursorWith(left.map((g) => g.item)));
        pause.recovered();
        break;
      } catch (err) {
        if (!isDependencyUnavailable(err)) throw err;
        await pause.wait(err);
        const items = left.map((g) => g.item);
        const written = new Set(
          await whileUnavailable(() => committedItems(loop.jobId, Math.min(...items) - 1, Math.max(...items)), pause),
        );
        for (const g of left) if (written.has(g.item)) progress.committed(g.item);
        left = left.filter((g) => !written.has(g.item));
        if (left.length === 0) return;
      }
    }
    for (const g of left) progress.committed(g.item);
  }

  /** Each item's commit error, or null once it is committed. */
  const committing = coalesce(async (group: ItemCommit[]): Promise<({ error: unknown } | null)[]> => {
    try {
      await commit(group);
      return group.map(() => null);
    } catch (error) {
      if (group.length === 1 || isControlSignal(error) || loop.signal.aborted) return group.map(() => ({ error }));
      const outcomes: ({ error: unknown } | null)[] = [];
      for (const g of group)
        outcomes.push(
          await commit([g]).then(
            () => null,
            (single: unknown) => ({ error: single }),
          ),
        );
      return outcomes;
    }
  }, MAX_GROUP);

  return async (item: ItemCommit): Promise<void> => {
    const failed = await committing(item);
    if (failed) throw failed.error;
  };
}

/**
 * The job's progress while items finish out of order: the cursor is the contiguous low watermark
 * (every item up to it is committed), and `above` holds the items committed beyond it — by this
 * run, or by an earlier one that stopped with items in flight.
 */
class Progress {
  constructor(
    private watermark: number,
    private readonly above: Set<number>,
  ) {
    this.advance();
  }

  isCommitted(item: number): boolean {
    return item <= this.watermark || this.above.has(item);
  }

  /** The cursor a commit of `items` may write: the watermark as it will be once they are committed. */
  cursorWith(items: readonly number[]): number {
    const adding = new Set(items);
    let c = this.watermark;
    while (adding.has(c + 1) || this.above.has(c + 1)) c += 1;
    return c;
  }

  committed(item: number): void {
    this.above.add(item);
    this.advance();
  }

  private advance(): void {
    while (this.above.delete(this.watermark + 1)) this.watermark += 1;
  }
}

/**
 * Runs `handle` for every item after the cursor (within its range, for a part of a split job),
 * keeping up to `loop.concurrency` items in flight, and commits each item's effect (or its
 * failure) together with the job's advance. What it guarantees:
 * - An item is recorded as failed only for a fault of its own (./item-fault.ts: its input, a
 *   value the database refuses to store, the provider's answer about it, or a failure it repeats
 *   while the other items go through), and the loop goes on. A control signal (the deadline
 *   above all) ends the loop with the item uncommitted, and so does an error nobody's known
 *   fault when no other item of the run went through: it may be the platform's.
 * - Nothing new is dispatched once the signal has aborted: it is checked before every dispatch
 *   and before every commit, so a handler that swallowed the deadline cannot keep the loop going.
 *   Items in flight then end with the signal (their calls take it), and the loop returns only
 *   when none is left, so the counts on the row are the committed items.
 * - Items finish out of order; items that finish together commit together (one transaction, see
 *   `groupCommitter`), each commit writes the contiguous low watermark as the cursor and marks its
 *   items committed (`JobItem`, unique per job and item). A resume skips every item already
 *   committed, below the cursor or above it, and redoes none.
 * - A control signal from one item (a rate-limit deferral, a fenced attempt) stops dispatching;
 *   the items in flight finish (and commit), then the signal ends the loop.
 * - PostgreSQL or Redis not reachable (in an item's handler or its commit) is neither the item's
 *   failure nor the job's: the job stops dispatching, waits with backoff (bounded by its signal:
 *   the wait counts against its budget), redoes the handler or the commit, and goes on.
 * Logs one summary line per pass and records each item's cost from dispatch to commit.
 */
export async function forEachItem<T>(
  loop: ItemLoop,
  items: AsyncIterable<T> | Iterable<T>,
  handle: (item: T, info: ItemInfo) => Promise<ItemEffect>,
  rowOf: (index: number) => number = (index) => index,
): Promise<PassSummary> {
  const pass = await openPass(loop);
  try {
    await dispatchAll(pass, items, (item, index) => runItem(pass, handle, item, index, rowOf(index)));
    if (!pass.stop && !loop.signal.aborted && !pass.sliceEnded) loop.onAllDispatched?.();
  } finally {
    await closePass(pass);
  }
  if (pass.stop) throw pass.stop.reason;
  // Items left at the end of the slice: the run hands them on.
  if (pass.sliceEnded) throw new SliceEnded(pass.summary.processed + pass.summary.failed);
  return pass.summary;
}

/** One pass of the loop: what its items share while they are in flight. */
interface Pass {
  loop: ItemLoop;
  summary: PassSummary;
  /** The range of the source batch this run covers (`from + 1 … to`), and the items in flight at once. */
  from: number;
  to: number;
  limit: number;
  progress: Progress;
  costs: ItemCosts | null;
  inFlight: Set<Promise<void>>;
  /** The control signal (or error) that ends the pass, from the first item that met it. */
  stop: { reason: unknown } | null;
  sliceEnded: boolean;
  /** Items waiting out a rate-limit or provider wait while other items of the job work; they end their wait when the pass stops. */
  resting: number;
  stopping: AbortController;
  /** Aborted when the slice's drain time is over: what items in flight take instead of the job's signal. */
  sliceOver: AbortController;
  itemSignal: AbortSignal;
  restSignal: AbortSignal;
  /** Every item in flight shares one pause: one probe per backoff step, whatever the concurrency. */
  pause: DependencyPause;
  commit: (item: ItemCommit) => Promise<void>;
  drainTimer?: NodeJS.Timeout;
}

async function openPass(loop: ItemLoop): Promise<Pass> {
  const from = loop.range?.from ?? 0;
  const to = loop.range?.to ?? Infinity;
  const above = new Set(await committedItems(loop.jobId, loop.cursor));
  // A part skips the items of its range that the job it was split from committed while they were
  // in flight (above that job's cursor, which the split started from).
  if (loop.range?.of) for (const item of await committedItems(loop.range.of, from, to)) above.add(item - from);
  const progress = new Progress(loop.cursor, above);
  const stopping = new AbortController();
  const sliceOver = new AbortController();
  const itemSignal = AbortSignal.any([loop.signal, sliceOver.signal]);
  // Every item in flight (and each of its calls) listens to these: hundreds at once, by design.
  setMaxListeners(0, sliceOver.signal, itemSignal);
  const pause = new DependencyPause(itemSignal, loop.log);
  const restSignal = AbortSignal.any([itemSignal, stopping.signal]);
  // Every resting item listens to it: hundreds at once, by design.
  setMaxListeners(0, restSignal);
  return {
    loop,
    summary: { processed: 0, failed: 0 },
    from,
    to,
    limit: Math.max(1, Math.floor(loop.concurrency ?? 1)),
    progress,
    costs: loop.kind ? new ItemCosts({ queue: loop.queue ?? "", kind: loop.kind }) : null,
    inFlight: new Set<Promise<void>>(),
    stop: null,
    sliceEnded: false,
    resting: 0,
    stopping,
    sliceOver,
    itemSignal,
    restSignal,
    pause,
    commit: groupCommitter(loop, progress, pause),
  };
}

/** Dispatches every item not yet committed, up to `limit` in flight, until the items, the signal, a stop or the slice end. */
async function dispatchAll<T>(
  pass: Pass,
  items: AsyncIterable<T> | Iterable<T>,
  run: (item: T, index: number) => Promise<void>,
): Promise<void> {
  const { loop, summary, inFlight } = pass;
  let index = 0;
  for await (const item of items) {
    index += 1;
    if (index > pass.to) break;
    if (index <= pass.from || pass.progress.isCommitted(index - pass.from)) continue;
    while (inFlight.size >= pass.limit && !pass.stop) await Promise.race(inFlight);
    // During an outage nothing new starts: the items in flight wait and are redone first.
    await pass.pause.idle(pass.stopping.signal);
    await loop.dispatchHold?.();
    if (pass.stop) break;
    loop.signal.throwIfAborted();
    // A run that committed nothing yet is not moving: it goes on, and meets its deadline like any other.
    if (loop.slice && performance.now() >= loop.slice.dispatchUntil && summary.processed + summary.failed > 0) {
      pass.sliceEnded = true;
      pass.drainTimer = setTimeout(
        () => pass.sliceOver.abort(new SliceEnded(summary.processed + summary.failed)),
        Math.max(0, loop.slice.drainUntil - performance.now()),
      );
      break;
    }
    const running: Promise<void> = run(item, index)
      .catch((reason: unknown) => {
        pass.stop ??= { reason };
        pass.stopping.abort();
      })
      .finally(() => inFlight.delete(running));
    inFlight.add(running);
  }
}

/** Whatever ended the loop, nothing is left running behind it: the counts are the commits. One summary line per pass. */
async function closePass(pass: Pass): Promise<void> {
  const { summary, loop } = pass;
  await Promise.all([...pass.inFlight]);
  clearTimeout(pass.drainTimer);
  await pass.costs?.flush();
  const line = `processed=${summary.processed} failed=${summary.failed}`;
  if (summary.failed > 0) loop.log.warn(summary, line);
  else loop.log.info(summary, line);
}

/**
 * How often an item whose error is nobody's known fault (./item-fault.ts `unknown`) is tried
 * before it is a poison item, and the waits between the tries (real time: a platform's fault
 * lasts as long at any time scale).
 */
export const POISON_TRIES = 3;
const POISON_WAITS_MS = [500, 2_000];

/**
 * One item: handled, committed with the job's advance (or as failed), counted, and its cost
 * recorded. An error that is nobody's known fault redoes the item; once it has failed
 * `POISON_TRIES` times while other items of the run went through, it is a poison item, recorded
 * as failed. If none went through, the fault may be the platform's: the error ends the loop and
 * the item stays for the resume.
 */
async function runItem<T>(
  pass: Pass,
  handle: (item: T, info: ItemInfo) => Promise<ItemEffect>,
  item: T,
  index: number,
  row: number,
): Promise<void> {
  const { loop } = pass;
  const dispatched = performance.now();
  let done: ItemCommit["outcome"] | undefined;
  for (let tries = 1; !done; tries++) {
    try {
      const outcome = await handleItem(pass, handle, item, index, row);
      loop.signal.throwIfAborted();
      done = await commitOutcome(pass, index, row, outcome);
    } catch (err) {
      // A deadline or a cancel that reached the commit as any error is still that signal.
      if (loop.signal.aborted) throw loop.signal.reason;
      if (itemFault(err, loop.signal).of !== "unknown") throw err;
      loop.log.error({ err, row, try: tries }, "unexpected error in an item");
      if (tries < POISON_TRIES) await sleep(POISON_WAITS_MS[tries - 1]!, pass.restSignal);
      else if (pass.summary.processed === 0) throw err;
      else done = await commitOutcome(pass, index, row, { ok: false, reason: poisonReason(tries) });
    }
  }
  if (done.ok) pass.summary.processed += 1;
  else {
    pass.summary.failed += 1;
    if (loop.kind) metrics.jobItemsFailed.inc({ kind: loop.kind });
  }
  pass.costs?.add(performance.now() - dispatched, done.ok);
}

type Handled = { ok: true; effect: ItemEffect } | { ok: false; reason: string };

/**
 * Runs the handler until the item has an outcome: its effect, or its own failure. A control
 * signal ends it; an error that is nobody's known fault is thrown to `runItem`.
 */
async function handleItem<T>(
  pass: Pass,
  handle: (item: T, info: ItemInfo) => Promise<ItemEffect>,
  item: T,
  index: number,
  row: number,
): Promise<Handled> {
  const { loop, sliceOver } = pass;
  for (;;) {
    try {
      return {
        ok: true,
        effect: await untilAborted(handle(item, { index, row, signal: pass.itemSignal }), sliceOver.signal),
      };
    } catch (err) {
      // A deadline that arrives as any error (wrapped, re-thrown, swallowed into another) is still the deadline.
      if (loop.signal.aborted) throw loop.signal.reason;
      if (sliceOver.signal.aborted) throw sliceOver.signal.reason;
      // A long wait for a limit gives the worker slot back only when the whole job would wait:
      // while other items of the job are working, the slot is not idle, and draining them for
      // one item's wait would stall the job behind its slowest call. So this item waits its
      // turn and tries again; the last item to be working takes the job to *delayed*.
      if (isRateLimitDefer(err) && pass.inFlight.size - pass.resting > 1 && !pass.stop) {
        await restThenRetry(pass, err);
        continue;
      }
      const fault = itemFault(err, loop.signal);
      // PostgreSQL or Redis away (a lookup, a limiter, a provider slot): the item waits and is redone.
      if (fault.of === "dependency") {
        await pass.pause.wait(err);
        continue;
      }
      if (fault.of === "item") return { ok: false, reason: fault.reason };
      throw err;
    }
  }
}

/** An item sleeps out its rate-limit wait while others work; if the pass stopped meanwhile, the wait ends it. */
async function restThenRetry(pass: Pass, err: RateLimitDefer): Promise<void> {
  pass.resting += 1;
  try {
    await sleep(err.waitMs, pass.restSignal).catch(() => undefined);
  } finally {
    pass.resting -= 1;
  }
  if (pass.stop) throw err;
}

/**
 * Commits the item's outcome. The database refusing this item's own value (./item-fault.ts) is
 * that item's failure, committed as such, and the job goes on. Nothing else is: a control
 * signal, an aborted run or any other error is thrown with the item uncommitted (an unreachable
 * database is waited out in the committer).
 */
async function commitOutcome(pass: Pass, index: number, row: number, outcome: Handled): Promise<ItemCommit["outcome"]> {
  const item = index - pass.from;
  const done: ItemCommit["outcome"] = outcome.ok
    ? { ok: true as const, effect: outcome.effect ?? (async () => undefined) }
    : { ok: false as const, row, reason: outcome.reason };
  try {
    await pass.commit({ item, outcome: done });
    return done;
  } catch (err) {
    const fault = done.ok ? itemFault(err, pass.loop.signal) : null;
    if (fault?.of !== "item") throw err;
    pass.loop.log.warn({ err, row }, "the database refused an item's write: the item is recorded as failed");
    const failed = { ok: false as const, row, reason: fault.reason };
    await pass.commit({ item, outcome: failed });
    return failed;
  }
}

/** `p`, or the abort reason of `signal` as soon as it aborts (whatever `p` still does is not waited for). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err as Error);
      },
    );
  });
}

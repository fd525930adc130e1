import fc from "fast-check";
import { afterAll, describe, expect, it, vi } from "vitest";
import { SWEEP_POLICY, worstCaseMs } from "@/lib/catalog/generation-policy";
import type { Reserve, ReserveKind } from "./reserves";

// A thousand short histories make ~20,000 small commits: this file's connections
// skip waiting for the disk flush of each commit (synchronous_commit=off). Durability after a
// server crash is all that changes; locking, isolation and visibility — what is tested — do not.
// The environment is parsed once, on first use, so it is set before anything of the project loads.
vi.stubEnv("DATABASE_URL", `${process.env.DATABASE_URL}?options=-c%20synchronous_commit%3Doff`);
const { closeDb, db } = await import("@/lib/db/client");
const { QuotaRefused } = await import("./errors");
const { claim, heartbeatReserve, release } = await import("./reserves");
const { sweepReserves } = await import("./sweep");
const { dropQuotaTenants, quotaTenant } = await import("./test-fixtures");

/**
 * Randomized histories of generations against the real database, on a controlled clock in steps
 * of one heartbeat (30 s of production time): generations of any duration up to the worst case,
 * processes that die between claim and release, processes that stall (silent, then back), dislike
 * regenerations, and the sweeper at random moments — concurrently with the claims and releases of
 * the same moment. After every sweep and at the end, the books and the flags must hold.
 */

const TICK_MS = SWEEP_POLICY.heartbeatMs;
const WINDOW = Math.ceil(SWEEP_POLICY.windowMs / TICK_MS);
const LEASE = Math.ceil(SWEEP_POLICY.leaseMs / TICK_MS);
const WORST = Math.ceil(worstCaseMs() / TICK_MS);
/**
 * Property runs, each of which plays PARALLEL independent histories at once (one tenant each), of
 * ~80 small statements each. `npm run test:property` (vitest `--mode property`) plays 2,048
 * histories (measured 61 s on two cores at load ~3); `npm test` plays 192 (12 s at load ~4, 32 s
 * at load ~10) with a new seed every time — the same properties over the same generators, fewer
 * samples per run.
 */
const FULL = import.meta.env.MODE === "property";
const RUNS = FULL ? 128 : 12;
const PARALLEL = 16;

type Fate = "succeeds" | "fails" | "crashes" | "stalls";

interface Gen {
  kind: ReserveKind;
  ad: number;
  start: number;
  duration: number;
  fate: Fate;
  /** Crash or stall: heartbeats stop this many ticks after the start (at most the duration). */
  cut: number;
  /** Stall: ticks of silence before the process is back (heartbeats, then a successful release). */
  stall: number;
}

const genArb = fc.record({
  kind: fc.constantFrom<ReserveKind>("generate", "generate", "dislike"),
  ad: fc.integer({ min: 0, max: 1 }),
  start: fc.integer({ min: 0, max: 40 }),
  duration: fc.integer({ min: 0, max: WORST }),
  fate: fc.constantFrom<Fate>("succeeds", "succeeds", "fails", "crashes", "stalls"),
  cut: fc.integer({ min: 0, max: WORST }),
  stall: fc.integer({ min: 1, max: WINDOW + WORST }),
});

const historyArb = fc.record({
  size: fc.integer({ min: 1, max: 3 }),
  gens: fc.array(genArb, { minLength: 1, maxLength: 4 }),
  sweeps: fc.uniqueArray(fc.integer({ min: 0, max: 40 + WORST + WINDOW + LEASE + 5 }), { minLength: 1, maxLength: 6 }),
});

/** When the generation's process stops for good (release or death), or is silent. */
function endOf(g: Gen): number {
  if (g.fate === "crashes") return Infinity;
  return g.start + g.duration + (g.fate === "stalls" ? g.stall : 0);
}

/** Whether the process heartbeats at tick t. */
function beatsAt(g: Gen, t: number): boolean {
  if (t < g.start) return false;
  const cut = g.start + Math.min(g.cut, g.duration);
  if (g.fate === "crashes") return t <= cut;
  if (g.fate === "stalls" && t > cut && t < cut + g.stall) return false;
  return t <= endOf(g);
}

/** The last tick ≤ t at which it heartbeat. */
function lastBeat(g: Gen, t: number): number {
  for (let x = t; x >= g.start; x--) if (beatsAt(g, x)) return x;
  return g.start;
}

const at = (t0: number, tick: number) => new Date(t0 + tick * TICK_MS);

interface Live {
  gen: Gen;
  reserve: Reserve;
  written: number;
  released: boolean;
  result?: Awaited<ReturnType<typeof release>>;
  reclaimedAt?: number;
}

/** The books and the flags of one tenant, read in one statement (it runs after every sweep). */
async function check(packId: string): Promise<void> {
  const [b] = await db().$queryRaw<{ size: number; remaining: number; spent: bigint; live: bigint; flags: string[] }[]>`
    SELECT p.size, p.remaining,
      (SELECT count(*) FROM "QuotaSpend" s WHERE s."packId" = p.id) AS spent,
      (SELECT count(*) FROM "QuotaReserve" r WHERE r."packId" = p.id) AS live,
      ARRAY(
        SELECT f.id || ' used=' || f.used || ' holding=' || f.holding FROM (
          SELECT a.id::text AS id, COALESCE((a.params->>'aiDislikeRetryUsed')::boolean, false) AS used,
            EXISTS (SELECT 1 FROM "QuotaReserve" r WHERE r.subject = a.id AND r.kind = 'dislike') AS holding
          FROM "Ad" a WHERE a."tenantId" = p."tenantId"
        ) f WHERE f.used <> f.holding
      ) AS flags
    FROM "QuotaPack" p WHERE p.id = ${packId}::uuid`;
  expect(b!.remaining + Number(b!.spent) + Number(b!.live), "remaining + spent + live reserves = pack size").toBe(
    b!.size,
  );
  expect(b!.flags, "aiDislikeRetryUsed is true exactly while a dislike reserve is live").toEqual([]);
}

async function runHistory(h: { size: number; gens: Gen[]; sweeps: number[] }): Promise<void> {
  const t = await quotaTenant("prop", h.size, 2);
  const t0 = Date.now() - 7 * 24 * 3600_000;
  const lives: Live[] = [];
  const refusals: string[] = [];
  const lastRelease = Math.max(0, ...h.gens.map(endOf).filter(Number.isFinite));
  const lastStart = Math.max(...h.gens.map((g) => g.start));
  // A final sweep late enough to take back every dead process's reserve.
  const finalSweep = Math.max(lastRelease, lastStart) + WINDOW + LEASE + 2;
  const sweepTicks = new Set([...h.sweeps, finalSweep]);
  const ticks = [
    ...new Set([...h.gens.map((g) => g.start), ...h.gens.map(endOf).filter(Number.isFinite), ...sweepTicks]),
  ].sort((a, b) => a - b);
  const sweptAt = new Map<string, number>();

  for (const tick of ticks) {
    // Proof of life up to the previous tick, as a process heartbeating every tick would have left
    // it; only the sweeper reads heartbeats, so they are written before each sweep.
    if (sweepTicks.has(tick)) {
      await Promise.all(
        lives.map(async (l) => {
          const beat = lastBeat(l.gen, tick - 1);
          if (l.released || beat <= l.written) return;
          l.written = beat;
          await heartbeatReserve(l.reserve, at(t0, beat));
        }),
      );
    }
    const work: Promise<unknown>[] = [];
    for (const g of h.gens.filter((x) => x.start === tick)) {
      work.push(
        claim({ tenantId: t.tenantId, kind: g.kind, subject: t.adIds[g.ad]!, now: at(t0, tick) }).then(
          (reserve) => void lives.push({ gen: g, reserve, written: tick, released: false }),
          (err: unknown) => {
            if (!(err instanceof QuotaRefused)) throw err;
            refusals.push(err.code);
          },
        ),
      );
    }
    for (const l of lives.filter((x) => !x.released && endOf(x.gen) === tick && x.gen.start !== tick)) {
      l.released = true;
      work.push(
        release(l.reserve, l.gen.fate === "fails" ? "failed" : "succeeded", { now: at(t0, tick) }).then((r) => {
          l.result = r;
        }),
      );
    }
    if (sweepTicks.has(tick)) {
      work.push(
        sweepReserves({
          now: at(t0, tick),
          windowMs: WINDOW * TICK_MS,
          leaseMs: LEASE * TICK_MS,
          tenantId: t.tenantId,
        }).then((rs) => {
          for (const r of rs) sweptAt.set(r.reserveId, tick);
        }),
      );
    }
    await Promise.all(work);
    // A generation that ends the tick it starts is released once its claim is in.
    for (const l of lives.filter((x) => !x.released && endOf(x.gen) === tick)) {
      l.released = true;
      l.result = await release(l.reserve, l.gen.fate === "fails" ? "failed" : "succeeded", { now: at(t0, tick) });
    }
    if (sweepTicks.has(tick)) await check(t.packId);
  }

  expect(
    refusals.every((c) => ["pack_empty", "dislike_in_progress", "dislike_already_used"].includes(c)),
    refusals.join(),
  ).toBe(true);
  const ids = lives.map((l) => l.reserve.id);
  const [spends, reclaims, lates] = await Promise.all([
    db().quotaSpend.findMany({ where: { reserveId: { in: ids } }, select: { reserveId: true } }),
    db().reserveReclaim.findMany({ where: { reserveId: { in: ids } }, select: { reserveId: true } }),
    db().lateRelease.findMany({ where: { reserveId: { in: ids } }, select: { reserveId: true, resolution: true } }),
  ]);
  const count = (rows: { reserveId: string }[], id: string) => rows.filter((r) => r.reserveId === id).length;
  for (const l of lives) {
    const id = l.reserve.id;
    const g = l.gen;
    const spent = count(spends, id);
    const reclaimed = count(reclaims, id);
    const late = lates.find((x) => x.reserveId === id);
    // Where the model says the sweeper may take it: the first sweep past the window and the lease.
    const due = [...sweepTicks]
      .sort((a, b) => a - b)
      .find((s) => s >= g.start && s - g.start > WINDOW && s - lastBeat(g, s - 1) > LEASE && s <= endOf(g));
    const context = JSON.stringify({ g, due, swept: sweptAt.get(id), result: l.result });
    if (g.fate === "succeeds" || g.fate === "fails") {
      // Live all along (within the worst case, heartbeating): never reclaimed, never late.
      expect(reclaimed, `a live generation is never reclaimed ${context}`).toBe(0);
      expect(late, context).toBeUndefined();
      expect(spent, `charged exactly once on success, never on failure ${context}`).toBe(g.fate === "succeeds" ? 1 : 0);
    } else if (g.fate === "crashes") {
      expect(reclaimed, `a dead process's reserve is refunded exactly once ${context}`).toBe(1);
      expect(sweptAt.get(id), `taken back at the first sweep past the window and the lease ${context}`).toBe(due);
      expect(spent + (late ? 1 : 0), context).toBe(0);
    } else {
      // Stalled, then back: reclaimed only when the model allows it; charged exactly once either way.
      if (reclaimed === 1) {
        expect(due, `reclaimed only past the window and the lease ${context}`).toBeDefined();
        expect(sweptAt.get(id), context).toBe(due);
        expect(l.result?.type, context).toBe("late");
        expect(
          spent + (late?.resolution === "debt" ? 1 : 0),
          `a late success is charged (or owed) exactly once ${context}`,
        ).toBe(1);
      } else {
        // Not swept: it was due only at the very tick it was released (a race either may win), or never.
        expect(due === undefined || due === endOf(g), context).toBe(true);
        expect(late, context).toBeUndefined();
        expect(spent, `charged exactly once ${context}`).toBe(1);
      }
    }
  }
}

describe("quota reserves under randomized histories (real PostgreSQL)", () => {
  afterAll(async () => {
    await dropQuotaTenants();
    await closeDb();
  });

  it(
    `books balance, successes are charged once, crashes refunded once, dislike flags never left behind (${RUNS * PARALLEL} histories)`,
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(historyArb, { minLength: PARALLEL, maxLength: PARALLEL }), async (histories) => {
          await Promise.all(histories.map(runHistory));
        }),
        { numRuns: RUNS },
      );
    },
    FULL ? 900_000 : 240_000,
  );
});

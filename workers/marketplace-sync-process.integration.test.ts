import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startSyncHarness } from "@/test/helpers/sync-harness";

// A real worker process (node + tsx, workers/main.ts) on the harness's Redis prefix and
// marketplace simulator, killed with SIGKILL mid-sync; a second one finishes the job.
const root = `${import.meta.dirname}/..`;
const PAGES = 10;
let h: Awaited<ReturnType<typeof startSyncHarness>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  h = await startSyncHarness({ timeScale: 0.01, pages: PAGES });
});

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

afterAll(async () => {
  await h.close();
});

function startWorkerProcess(): ChildProcess {
  // process.env carries the harness's stubs: prefix, time scale, budgets, the simulator's URL.
  const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: "warn", BOUNDED_WORKER_CONCURRENCY: "2" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  children.push(child);
  return child;
}

const exited = (c: ChildProcess) =>
  new Promise<void>((resolve) =>
    c.exitCode !== null || c.signalCode !== null ? resolve() : c.once("exit", () => resolve()),
  );

describe("a sync and its worker process", () => {
  it("a worker SIGKILLed mid-sync: another one resumes at the cursor; every page is written once and none is fetched again from the start", async () => {
    const tenant = h.tenant("sigkill");
    const started = await h.m.syncs.startSync({ tenant, family: "statistics" });
    const first = startWorkerProcess();
    const atKill = await h.waitFor(
      "the first worker to be mid-sync",
      async () => {
        const r = await h.row(started.jobId);
        return r.processed >= 3 && r;
      },
      60_000,
    );
    first.kill("SIGKILL");
    await exited(first);
    expect(atKill.processed).toBeLessThan(PAGES);

    startWorkerProcess();
    const done = await h.waitFor(
      "the sync to complete",
      async () => {
        const r = await h.row(started.jobId);
        return r.status === "completed" && r.message !== null && r;
      },
      90_000,
    );
    expect(done).toMatchObject({ processed: PAGES, total: PAGES, failed: 0 });
    // Killed mid-run, the next worker fences it with a new attempt; killed while the sync waited
    // for a window in delayed (no run alive), it resumes the same attempt.
    expect(done.attempt).toBeGreaterThanOrEqual(atKill.attempt);
    const pages = await h.m.db
      .db()
      .marketplaceRecord.groupBy({ by: ["page"], where: { tenant: { slug: tenant } }, _count: { _all: true } });
    expect(pages.length).toBe(PAGES);
    expect(pages.every((p) => p._count._all === 20)).toBe(true);
    // Resumed at the cursor: at most the page in flight at the kill is asked for twice.
    const { accepted, violations } = h.sim.marketplace.stats();
    expect(accepted).toBeLessThanOrEqual(PAGES + 1);
    expect(violations.total).toBe(0);
  }, 150_000);
});

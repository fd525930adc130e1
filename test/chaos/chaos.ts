/**
 * A chaos run: the whole system (web, N worker processes, simulators, a Redis of its own) takes
 * a mixed workload through its HTTP API while worker processes are SIGKILLed at random moments
 * and restarted, Redis is killed and restarted once, and the web process once. Meanwhile every
 * non-terminal row is watched against its bound. Then the chaos stops, the system settles, an
 * operator retries what the chaos ended (one bulk retry through the API, as on /jobs), and the
 * database is checked: no job lost, no item applied twice, the quota books balanced.
 *
 * With `postgres`, the run has a PostgreSQL cluster of its own (test/chaos/postgres.ts) and stops
 * it once for `outageMs`, beside the Redis restart and the web restart. All along, a poller hits a
 * few API routes and pages and classifies each answer by the outage windows (test/chaos/poller.ts).
 * With `noManualAction`, the goals are those of "a dependency briefly down needs no human": every
 * job completed before any operator retry, no item lost or applied twice, no 5xx outside the
 * outage windows.
 *
 * `npm run test:chaos` runs the full size; the browser suite runs a small one (e2e/chaos.spec.ts).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { dropDatabase, migrate } from "../../scripts/db/migrate";
import { ChaosDb, type Check, type Overrun } from "./checks";
import { explainFindings, type Fault } from "./explain";
import { WebPoller, type PollSummary } from "./poller";
import { PrivatePostgres } from "./postgres";
import { RedisStalls, type RedisStall } from "./redis-stalls";
import { ChaosSystem, ROOT, type ChaosPorts } from "./system";
import { seeded, Workload, type Accepted, type WorkKind } from "./workload";

export interface ChaosOptions {
  jobs: number;
  /** Real seconds over which the jobs are submitted (the chaos lasts as long). */
  seconds: number;
  seed: number;
  timeScale: number;
  workers: number;
  /** Real seconds between two worker kills: drawn uniformly from this range. */
  killEvery: [number, number];
  ports: ChaosPorts;
  database: string;
  /** Imports only, of this many rows each; otherwise the mixed workload. */
  importsOnly?: { rows: [number, number] };
  /** A PostgreSQL of the run's own on `port`, stopped once for `outageMs`; otherwise 127.0.0.1:5432 is used and never stopped. */
  postgres?: { port: number; outageMs: number };
  /** The goals say every job completed without an operator's retry and no 5xx came outside the outage windows. */
  noManualAction?: boolean;
  /** Freeze the simulators (SIGSTOP, then SIGCONT) for this many real ms, once, halfway through the chaos. */
  freezeSimMs?: number;
  /**
   * Plant two findings the report must explain: one import's broken row passed off as good (so its
   * recorded failure is unexpected), and one written row of another import deleted once the run
   * has settled (so it is missing). For checking the report, never for a verdict on the system.
   */
  plant?: boolean;
  log?: (line: string) => void;
}

export interface ChaosReport {
  options: Omit<ChaosOptions, "log">;
  did: {
    workerKills: number;
    redisDownMs: number;
    simFrozenMs: number;
    webDownMs: number;
    pgDownMs: number;
    unexpectedWorkerExits: number;
    resent: number;
    throttled: number;
    gaveUp: number;
  };
  /** The goals of a short outage: jobs done without a human, items exactly once, the web's answers by window. */
  goals: {
    completedWithoutRetry: number;
    accepted: number;
    items: { expected: number; lost: number; doubled: number };
    poll: PollSummary;
  };
  /** Stalls Redis measured itself (test/chaos/redis-stalls.ts): outage windows the machine caused. */
  redisStalls: RedisStall[];
  /** Each 5xx outside the windows (the first five) beside the warnings the web logged around it. */
  errorsExplained: string[];
  accepted: Accepted[];
  refused: Record<string, number>;
  /** Statuses when the chaos had settled, before any retry. */
  afterChaos: Record<string, number>;
  /** Of those, the ones not completed, by kind: what the operator then retried. */
  endedByChaos: { kind: string; status: string; n: number }[];
  retries: { round: number; retried: number }[];
  final: Record<string, number>;
  overruns: Overrun[];
  maxSilentOverBoundMs: number;
  quota: { spent: number; reclaimed: number; late: number; debts: number };
  checks: Check[];
  /** Every row that did not end as its file said, explained beside the faults around it. */
  findings: string[];
  /** The faults the run caused, from its start. */
  faults: Fault[];
  startedAt: number;
  ok: boolean;
}

const OPERATOR_TOKEN = "chaos-operator-token-0123456789abcdef";
/** Time allowed for a reaper pass and the watch's polling, on top of a row's bound. */
const PASS_TOLERANCE_MS = 2_000;
/** How long the system may take to bring every row to a terminal state once the chaos stops. */
const SETTLE_MS = 180_000;
/** After an outage window closes, clients reconnect (Redis's retry step is up to 2 s): answers this soon after still count as inside. */
const WINDOW_TOLERANCE_MS = 5_000;

/** The reaper's timings at a time scale (lib/jobs/liveness.ts): interval, and the grace after the last sign of life. */
function reaperTimings(scale: number) {
  const interval = Math.max(60_000 * scale, 1_000);
  const silence = 3 * Math.max(30_000 * scale, 500);
  return { intervalMs: interval, graceMs: Math.max(interval, silence) };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const say = o.log ?? ((l: string) => console.log(l));
  const random = seeded(o.seed);
  const postgres = o.postgres ? new PrivatePostgres(o.postgres.port) : null;
  if (postgres) {
    say(`chaos: starting a PostgreSQL of its own on port ${postgres.port} (initdb)`);
    postgres.init();
  }
  const databaseUrl = postgres ? postgres.url(o.database) : `postgresql://postgres@127.0.0.1:5432/${o.database}`;
  const sim = `http://127.0.0.1:${o.ports.sim}`;
  // Waiting out a dependency counts against a job's budget like any wait: the imports' budget, at
  // this time scale, holds a PostgreSQL outage three times over plus the work, so an outage pauses
  // imports and never times them out.
  const importBudgetS = Math.max(
    3_000,
    Math.ceil(((3 * ((o.postgres?.outageMs ?? 0) + (o.freezeSimMs ?? 0))) / 1000 + 60) / o.timeScale),
  );
  const env: Record<string, string> = {
    PORT: String(o.ports.web),
    DATABASE_URL: databaseUrl,
    BOUNDED_REDIS_PREFIX: "bounded-chaos",
    BOUNDED_SIM_PORT: String(o.ports.sim),
    MODEL_BASE_URL: `${sim}/v1`,
    MARKETPLACE_BASE_URL: `${sim}/marketplace`,
    IMAGE_PROVIDER_BASE_URL: `${sim}/images`,
    BOUNDED_TIME_SCALE: String(o.timeScale),
    BOUNDED_DEMO: "0",
    // Item outcomes are then known in advance: a bad row or a damaged file fails, nothing else.
    BOUNDED_SIM_MODEL_ERROR_RATE: "0",
    BOUNDED_SIM_OCR_ERROR_RATE: "0",
    BOUNDED_ADMIN_PASSWORD: "chaos-operator-password",
    BOUNDED_BOOTSTRAP_TOKEN: OPERATOR_TOKEN,
    BOUNDED_SESSION_SECRET: "chaos-session-secret-0123456789abcdef0123456789",
    LOG_LEVEL: "info",
    // Budgets that fit the work on a small, busy machine, where a commit is not scaled and so weighs
    // more than in production: the chaos is about crashes, not deadlines (those have their own
    // tests). Each still bounds its rows, and the watch below holds them to it.
    BOUNDED_BUDGET_IMPORTS_SOFT_S: String(importBudgetS),
    // Measured on direct calls: with this budget an import would otherwise take the batch lane.
    BOUNDED_BATCH_LANE_KINDS: "none",
    BOUNDED_BUDGET_IMPORTS_HARD_S: String(Math.round(importBudgetS * 1.5)),
    BOUNDED_BUDGET_AGENT_INTERACTIVE_SOFT_S: "600",
    BOUNDED_BUDGET_AGENT_INTERACTIVE_HARD_S: "900",
    BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S: "3000",
    BOUNDED_BUDGET_MARKETPLACE_SYNC_HARD_S: "4500",
  };
  const { intervalMs, graceMs } = reaperTimings(o.timeScale);

  say(
    `chaos: seed ${o.seed}; ${o.jobs} jobs over ${o.seconds} s; time scale ${o.timeScale}; ${o.workers} worker processes; logs in test-results/${o.database}/`,
  );
  await dropDatabase(databaseUrl);
  await migrate(databaseUrl);
  const system = new ChaosSystem(o.ports, env, o.workers);
  const did = {
    workerKills: 0,
    redisDownMs: 0,
    simFrozenMs: 0,
    webDownMs: 0,
    pgDownMs: 0,
    unexpectedWorkerExits: 0,
    resent: 0,
    throttled: 0,
    gaveUp: 0,
  };
  const overrunsById = new Map<string, Overrun>();
  let maxOver = -Infinity;
  const chaosDb = new ChaosDb(databaseUrl);
  const faults: Fault[] = [];
  /** Records a fault from now until `work` ends. */
  const fault = async <T>(what: string, work: Promise<T> | (() => Promise<T>)): Promise<T> => {
    const from = Date.now();
    try {
      return await (typeof work === "function" ? work() : work);
    } finally {
      faults.push({ what, from, to: Date.now() });
    }
  };
  const startedAt = Date.now();
  const redisStalls = new RedisStalls(o.ports.redis);
  try {
    // First start's operator token (BOUNDED_BOOTSTRAP_TOKEN), as `npm start` does it, once Redis runs.
    await system.start(() => {
      const boot = spawnSync(process.execPath, ["--import", "tsx", "scripts/bootstrap.ts"], {
        cwd: ROOT,
        env: { ...process.env, ...system.env },
        encoding: "utf8",
      });
      if (boot.status !== 0) throw new Error(`bootstrap failed: ${boot.stderr}`);
    });
    const workload = new Workload(system.baseUrl, OPERATOR_TOKEN, random, o.importsOnly, o.plant ?? false);
    await workload.grantPacks();
    const firstProgress = () => workload.stats.accepted.find((a) => a.progressToken)?.progressToken;
    const poller = new WebPoller(system.baseUrl, OPERATOR_TOKEN, () => {
      const token = firstProgress();
      return [
        "/api/health",
        "/api/jobs?status=running",
        "/jobs",
        ...(token ? [`/api/progress/${token}`, `/progress/${token}`] : []),
      ];
    });
    poller.start();
    redisStalls.start();

    // The watch: every half second, rows silent past their bound, with a tolerance for the reaper's
    // own pass (its queries and this watch's polling). While Redis is down the reaper cannot ask
    // the queue about a row (it skips it), so the outage is added to the tolerance.
    let watching = true;
    let redisDownSince: number | null = null;
    let pgDownSince: number | null = null;
    const watch = (async () => {
      while (watching) {
        // Nor can a run write its heartbeat while PostgreSQL is stopped.
        const tolerance =
          PASS_TOLERANCE_MS +
          did.redisDownMs +
          did.pgDownMs +
          (redisDownSince ? Date.now() - redisDownSince : 0) +
          (pgDownSince ? Date.now() - pgDownSince : 0);
        for (const r of await chaosDb.overruns(o.timeScale, graceMs, intervalMs, tolerance).catch(() => [])) {
          const prev = overrunsById.get(r.id);
          if (!prev || prev.silentMs < r.silentMs) overrunsById.set(r.id, r);
        }
        await sleep(500);
      }
    })();
    const watchMax = (async () => {
      while (watching) {
        for (const r of await chaosDb.overruns(o.timeScale, graceMs, intervalMs, -1e12).catch(() => []))
          maxOver = Math.max(maxOver, r.silentMs - r.boundMs);
        await sleep(1_000);
      }
    })();

    // The chaos, beside the submissions.
    const chaosEnds = Date.now() + o.seconds * 1000;
    let chaosOn = true;
    const killer = (async () => {
      const restarts: Promise<void>[] = [];
      while (chaosOn) {
        await sleep((o.killEvery[0] + random() * (o.killEvery[1] - o.killEvery[0])) * 1000);
        if (!chaosOn) break;
        // Keep one worker process up: the test is of crashes, not of an outage of every worker.
        const ready = system.readyWorkers();
        if (ready.length < 2) continue;
        const victim = ready[Math.floor(random() * ready.length)]!;
        did.workerKills++;
        const downMs = 200 + random() * 1_300;
        faults.push({ what: `${victim} SIGKILLed`, from: Date.now(), to: Date.now() });
        restarts.push(
          system.restart(victim, downMs).catch((err) => say(`chaos: ${victim} did not come back: ${err.message}`)),
        );
      }
      await Promise.all(restarts);
    })();
    const outages = (async () => {
      if (postgres && o.postgres) {
        await sleep(o.seconds * 200);
        say(`chaos: stopping PostgreSQL for ${o.postgres.outageMs / 1000} s`);
        const w = poller.open("postgres");
        pgDownSince = Date.now();
        await fault("PostgreSQL stopped", async () => {
          postgres.stop();
          await sleep(o.postgres!.outageMs);
          postgres.start();
        });
        did.pgDownMs = Date.now() - pgDownSince;
        pgDownSince = null;
        poller.close(w);
        say("chaos: PostgreSQL is back");
        await sleep(o.seconds * 100);
      } else await sleep(o.seconds * 350);
      say("chaos: killing Redis (SIGKILL); it comes back from its append-only file");
      let w = poller.open("redis");
      let t = Date.now();
      redisDownSince = t;
      await fault("Redis SIGKILLed and restarting", system.restart("redis", 1_500));
      did.redisDownMs = Date.now() - t;
      redisDownSince = null;
      poller.close(w);
      await sleep(o.seconds * (postgres ? 150 : 300));
      say("chaos: killing the web process (SIGKILL)");
      w = poller.open("web");
      t = Date.now();
      await fault("web SIGKILLed and restarting", system.restart("web", 1_000));
      did.webDownMs = Date.now() - t;
      poller.close(w);
    })();
    const freeze = (async () => {
      if (!o.freezeSimMs) return;
      await sleep(o.seconds * 500);
      say(`chaos: freezing the simulators (SIGSTOP) for ${o.freezeSimMs / 1000} s`);
      const t = Date.now();
      await fault("simulators frozen (SIGSTOP)", system.freeze("sim", o.freezeSimMs));
      did.simFrozenMs = Date.now() - t;
      say("chaos: the simulators go on (SIGCONT)");
    })();

    const perJob = (o.seconds * 1000) / o.jobs;
    let n = 0;
    const submitters = Array.from({ length: 2 }, async () => {
      while (n < o.jobs) {
        const i = ++n;
        const due = chaosEnds - o.seconds * 1000 + i * perJob;
        if (due > Date.now()) await sleep(due - Date.now());
        if (!o.importsOnly) workload.markDelivered(await chaosDb.deliveredAds().catch(() => []));
        await workload.submitOne(i);
      }
    });
    await Promise.all(submitters);
    await Promise.all([outages, freeze]);
    if (Date.now() < chaosEnds) await sleep(chaosEnds - Date.now());
    chaosOn = false;
    await killer;
    did.resent = workload.stats.resent;
    did.throttled = workload.stats.throttled;
    did.gaveUp = workload.stats.gaveUp;
    did.unexpectedWorkerExits = system.unexpectedExits.length;
    say(
      `chaos: over — ${did.workerKills} worker kills, Redis down ${(did.redisDownMs / 1000).toFixed(1)} s, web down ${(did.webDownMs / 1000).toFixed(1)} s; ${workload.stats.accepted.length} jobs accepted; settling…`,
    );

    // Settle: every row terminal (the reaper finishes what the crashes left). A system that does
    // not settle fails the run with what was left, rather than hanging it.
    const unsettled: string[] = [];
    const settle = async (what: string): Promise<boolean> => {
      const started = Date.now();
      while ((await chaosDb.nonTerminal()) > 0) {
        if (Date.now() - started > SETTLE_MS) {
          unsettled.push(`${what}: still ${fmtCounts(await chaosDb.statusCounts())} after ${SETTLE_MS / 1000} s`);
          return false;
        }
        await sleep(500);
      }
      return true;
    };
    await settle("after the chaos");
    await poller.stop();
    await redisStalls.stop();
    poller.windows.push(...redisStalls.windows());
    const afterChaos = await chaosDb.statusCounts();
    const acceptedIds = workload.stats.accepted.map((a) => a.jobId);
    const completedWithoutRetry = await chaosDb.completedOf(acceptedIds);
    const ended = (await chaosDb.statusByKind()).filter(
      (r) => r.status !== "completed" && r.status !== "completed_with_errors",
    );
    say(`chaos: settled — ${fmtCounts(afterChaos)}`);

    // The operator retries what the chaos ended; each retry resumes at the job's cursor.
    const retries: { round: number; retried: number }[] = [];
    for (let round = 1; round <= 5 && unsettled.length === 0; round++) {
      const res = await workload.send(
        "/api/jobs/retry",
        () => ({
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ filter: {} }),
        }),
        true,
      );
      const body = (await res?.json()) as { retried?: number; matched?: number };
      if (!res?.ok) throw new Error(`bulk retry answered ${res?.status}: ${JSON.stringify(body)}`);
      if (!body.matched) break;
      retries.push({ round, retried: body.retried ?? 0 });
      say(`chaos: operator bulk retry #${round}: ${body.retried} of ${body.matched} jobs retried`);
      await settle(`after retry #${round}`);
    }

    // Reserves of generations killed mid-flight come back when the sweep window has passed.
    const windowMs = 25 * 60_000 * o.timeScale;
    const reservesUntil = Date.now() + windowMs * 2 + 30_000;
    while ((await chaosDb.liveReserves()) > 0 && Date.now() < reservesUntil) await sleep(500);
    watching = false;
    await Promise.all([watch, watchMax]);

    if (o.plant) {
      const planted = await chaosDb.deleteOneWrittenRow(workload.stats.accepted);
      if (planted) say(`chaos: planted — deleted the written row ${planted.row} of import ${planted.jobId}`);
    }
    const items = await chaosDb.importItems(workload.stats.accepted);
    const findings = explainFindings(await chaosDb.rowFindings(workload.stats.accepted), faults, startedAt);
    const poll = poller.summary(WINDOW_TOLERANCE_MS);
    const webLog = poll.errorsOutside.length ? readFileSync(join(system.logDir, "web.log"), "utf8") : "";
    const errorsExplained = poll.errorsOutside
      .slice(0, 5)
      .map((e) => `${e.status} ${e.path} at ${e.at}; the web logged: ${warningsNear(webLog, Date.parse(e.at))}`);
    const goals = { completedWithoutRetry, accepted: acceptedIds.length, items, poll };
    const goalChecks: Check[] = o.noManualAction
      ? [
          {
            name: "every job completed without manual action (before any operator retry)",
            ok: completedWithoutRetry === acceptedIds.length,
            detail: `${completedWithoutRetry}/${acceptedIds.length}`,
          },
          { name: "no item lost", ok: items.lost === 0, detail: `${items.lost} of ${items.expected} rows` },
          { name: "no item applied twice", ok: items.doubled === 0, detail: `${items.doubled}` },
          {
            name: "no 5xx answered outside the outage windows",
            ok: poll.errorsOutside.length === 0,
            detail: poll.errorsOutside.length
              ? poll.errorsOutside
                  .slice(0, 5)
                  .map((e) => `${e.status} ${e.path} at ${e.at}`)
                  .join("; ")
              : `${poll.answers} answers polled`,
          },
        ]
      : [];
    const checks: Check[] = [
      ...goalChecks,
      {
        name: "the system settled: every row terminal within 180 s of the chaos ending (and of each retry)",
        ok: unsettled.length === 0,
        detail: unsettled.join("; ") || "yes",
      },
      {
        name: "no row non-terminal past its bound (hard limit + grace + one reaper interval after its last sign of life)",
        ok: overrunsById.size === 0,
        detail: overrunsById.size
          ? `${overrunsById.size} rows: ${[...overrunsById.values()]
              .slice(0, 5)
              .map(
                (r) =>
                  `${r.kind} ${r.id} ${r.status} silent ${(r.silentMs / 1000).toFixed(1)} s > ${(r.boundMs / 1000).toFixed(1)} s`,
              )
              .join("; ")}`
          : `worst: ${(maxOver / 1000).toFixed(1)} s against its bound`,
      },
      ...(await chaosDb.finalChecks(workload.stats.accepted)),
      {
        name: "every import row ended as its file said: no good row recorded as failed, none missing",
        ok: findings.length === 0,
        detail: findings.length ? `${findings.length} rows, explained below` : "yes",
      },
    ];
    const report: ChaosReport = {
      options: {
        jobs: o.jobs,
        seconds: o.seconds,
        seed: o.seed,
        timeScale: o.timeScale,
        workers: o.workers,
        killEvery: o.killEvery,
        ports: o.ports,
        database: o.database,
        importsOnly: o.importsOnly,
        postgres: o.postgres,
        noManualAction: o.noManualAction,
        freezeSimMs: o.freezeSimMs,
        plant: o.plant,
      },
      did,
      goals,
      redisStalls: redisStalls.stalls,
      errorsExplained,
      accepted: workload.stats.accepted,
      refused: workload.stats.refused,
      afterChaos,
      endedByChaos: ended,
      retries,
      final: await chaosDb.statusCounts(),
      overruns: [...overrunsById.values()],
      maxSilentOverBoundMs: maxOver,
      quota: await chaosDb.quotaTotals(),
      checks,
      findings,
      faults,
      startedAt,
      ok: checks.every((c) => c.ok) && did.gaveUp === 0,
    };
    return report;
  } finally {
    await redisStalls.stop();
    await system.stop();
    await chaosDb.close();
    postgres?.destroy();
  }
}

/** The web's warnings and errors (pino level ≥ 40) logged within 3 s of `at`, in short. */
function warningsNear(log: string, at: number): string {
  const near: string[] = [];
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const entry = JSON.parse(line) as { level?: number; time?: string; msg?: string; err?: unknown; route?: string };
      if ((entry.level ?? 0) < 40 || Math.abs(Date.parse(entry.time ?? "") - at) > 3_000) continue;
      near.push(
        `${entry.time} ${entry.route ?? ""} ${entry.msg ?? ""} ${entry.err ? JSON.stringify(entry.err) : ""}`.trim(),
      );
    } catch {
      /* a line cut by the SIGKILL */
    }
  }
  return near.length ? near.slice(0, 5).join(" | ") : "nothing at warn or above";
}

function fmtCounts(c: Record<string, number>): string {
  return Object.entries(c)
    .map(([k, v]) => `${v} ${k}`)
    .join(", ");
}

/** The report as printed: what was done, what was found, each check with its counts. */
export function formatReport(r: ChaosReport): string {
  const byWork = new Map<WorkKind, number>();
  for (const a of r.accepted) byWork.set(a.work, (byWork.get(a.work) ?? 0) + 1);
  const lines = [
    "",
    `CHAOS seed=${r.options.seed} jobs=${r.accepted.length} time_scale=${r.options.timeScale} workers=${r.options.workers}`,
    `  did:      ${r.did.workerKills} worker processes SIGKILLed and restarted; ${r.options.postgres ? `PostgreSQL stopped once (down ${(r.did.pgDownMs / 1000).toFixed(1)} s); ` : ""}Redis SIGKILLed once (down ${(r.did.redisDownMs / 1000).toFixed(1)} s); web SIGKILLed once (down ${(r.did.webDownMs / 1000).toFixed(1)} s)${r.did.simFrozenMs ? `; simulators frozen once (${(r.did.simFrozenMs / 1000).toFixed(1)} s)` : ""}`,
    `            ${r.did.resent} requests sent again while a part was down, ${r.did.throttled} after a 429's Retry-After; ${r.did.gaveUp} never answered; ${r.did.unexpectedWorkerExits} worker exits not caused by the run`,
    `  accepted: ${[...byWork].map(([k, v]) => `${v} ${k}`).join(", ")}${Object.keys(r.refused).length ? `; refused by design: ${fmtCounts(r.refused)}` : ""}`,
    `  settled:  ${fmtCounts(r.afterChaos)}${r.endedByChaos.length ? ` (${r.endedByChaos.map((e) => `${e.n} ${e.kind} ${e.status}`).join(", ")})` : ""}`,
    `  retried:  ${r.retries.length ? r.retries.map((x) => `round ${x.round}: ${x.retried}`).join(", ") : "nothing to retry"}`,
    `  final:    ${fmtCounts(r.final)}`,
    `  quota:    ${r.quota.spent} units spent, ${r.quota.reclaimed} reserves reclaimed by the sweeper, ${r.quota.late} late releases, ${r.quota.debts} open debts`,
    `  goals:    jobs completed without manual action ${r.goals.completedWithoutRetry}/${r.goals.accepted}; items lost ${r.goals.items.lost}; items applied twice ${r.goals.items.doubled} (of ${r.goals.items.expected} import rows)`,
    `  web:      5xx outside the outage windows ${r.goals.poll.errorsOutside.length}; inside ${r.goals.poll.errorsInside} (slowest ${r.goals.poll.slowestErrorInsideMs} ms); no answer ${r.goals.poll.noAnswerInside} inside, ${r.goals.poll.noAnswerOutside} outside; ${r.goals.poll.answers} answers polled`,
    ...(r.redisStalls.length
      ? [
          `            Redis stalled ${r.redisStalls.length} times by its own latency monitor, each an outage window: ${r.redisStalls
            .slice(0, 5)
            .map((s) => `${s.event} ${s.ms} ms at ${new Date(s.at).toISOString()}`)
            .join("; ")}`,
        ]
      : []),
    ...r.checks.map((c) => `  [${c.ok ? "ok" : "FAIL"}] ${c.name} — ${c.detail}`),
    ...(r.errorsExplained.length ? ["  5xx outside the windows:", ...r.errorsExplained.map((e) => `    ${e}`)] : []),
    ...(r.findings.length ? ["  rows that did not end as their file said:", ...r.findings.map((f) => `    ${f}`)] : []),
    `CHAOS ${r.ok ? "PASSED" : "FAILED"}`,
  ];
  return lines.join("\n");
}

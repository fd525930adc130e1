/**
 * `npm run bench:tokens` (`npx tsx bench/tokens.ts`): how close a CSV import comes to what a
 * provider's tokens per minute allow, when Bounded is told nothing about that limit.
 *
 * The bundled model simulator limits tokens per minute (`BOUNDED_SIM_MODEL_TPM`, prompt +
 * completion as its `usage` reports them; 429 beyond, OpenAI's `x-ratelimit-*` headers on every
 * answer) low enough that tokens, not requests or calls in flight, bind. Bounded's limiter is
 * given no token limit (`BOUNDED_MODEL_TPM` unset): it learns the limit from the answers' headers.
 * Three worker processes (each a BullMQ Worker on `imports`, as workers/main.ts starts it) share
 * one Redis and one PostgreSQL; one 2,000-row import of realistic, varied rows (short card
 * payments, SEPA transfers with long remittance text, direct debits with mandate references).
 *
 * The ideal is what the limit allows for the tokens the rows really took: the sum of `usage`
 * (prompt + completion) over the calls that answered, less the minute's worth the simulator's
 * bucket holds when the run starts (full, as a provider's is after a quiet minute: those need no
 * wait), ÷ the limit per minute. Calls that were refused (429) take no tokens and are not counted
 * in it; they are counted in `share_429`. `ratio_to_token_ideal` = wall time (the Job row's
 * creation → its `finishedAt`) ÷ that ideal.
 *
 * Time scale 0.1 (`-- --scale`): a median call takes 550 ms, a production minute 6 s. An import
 * that does not end within 3,000 production s (≈ 10 × what its tokens need) ends the bench with a
 * FAIL line and exit code 1. Runs in a
 * database of its own (`bounded_bench_tokens` beside `DATABASE_URL`'s, created with the project's
 * migrations, dropped at the end) and a Redis prefix of its own (removed at the end). Ends with:
 * `RESULT bench=tokens ratio_to_token_ideal=… share_429=… worker_processes=3 rows_failed=… …`.
 */
import { fork } from "node:child_process";
import os from "node:os";
import path from "node:path";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import {
  BenchTimeout,
  benchDatabaseUrl,
  benchRedisPrefix,
  flagNumber,
  startImportsWorker,
  untilJobEnds,
  withinCap,
} from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";
import { distinctWord } from "../lib/format/distinct-word";

const SCALE = flagNumber("--scale") ?? 0.1;
const ROWS = 2_000;
const WORKER_PROCESSES = 3;
/**
 * The simulator's tokens per production minute: about a third of what the provider's 32 calls in
 * flight would otherwise get through (≈ 150 batch calls a minute of ≈ 700 tokens), so tokens bind.
 */
const TPM = flagNumber("--tpm") ?? 30_000;
/** Calls in flight and requests a second, for Bounded's limiter and the simulator alike (the defaults). */
const CONCURRENCY = 32;
const RPS = 30;
/** Every import's budget (production s): far beyond this run, so it is measured to its last row, never split. */
const BENCH_SOFT_S = 1_000_000;
const BENCH_HARD_S = 1_500_000;
const GOAL_RATIO = 1.2;
const GOAL_SHARE_429 = 0.01;
/** Production seconds the import may take before the bench gives up: ≈ 10 × the ~320 s its rows' tokens need. */
const CAP_S = 3_000;
/** Real ms the worker processes may take to stop once the import ended. */
const STOP_CAP_MS = 60_000;

const REPO = path.resolve(import.meta.dirname, "..");
const benchUrl = benchDatabaseUrl("bounded_bench_tokens");

/** A small deterministic generator, so every run uploads the same file. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const SHORT = [
  "REWE Markt",
  "Aldi Süd",
  "Shell",
  "Netflix",
  "Spotify",
  "Lidl",
  "Kiosk 24",
  "DB Bahn",
  "Uber",
  "Starbucks",
];
const LONG = [
  "Stadtwerke Berlin GmbH Energie und Wasser",
  "Hausverwaltung Schmidt & Partner Immobilien KG",
  "Techniker Krankenkasse Hauptverwaltung Hamburg",
  "Amazon EU S.a.r.l., Niederlassung Deutschland",
  "Deutsche Telekom AG Kundenservice Rechnungsstelle",
];
const WORDS =
  "Rechnung Nr Kundennummer Vertrag Abschlag Monat Zeitraum Lastschrift Mandatsreferenz Gläubiger-ID Verwendungszweck Bestellung Lieferung Erstattung Miete Nebenkosten Strom Gas Wasser Versicherung Beitrag Quartal Januar Februar März April Mai Juni".split(
    " ",
  );

/** A bank export of `rows` realistic rows: mostly short card payments, some SEPA transfers and direct debits with long remittance text (up to the 140 characters SEPA allows). */
function realisticCsv(rows: number): Uint8Array {
  const random = seeded(42);
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++) {
    const date = `2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}`;
    const amount = `-${Math.floor(random() * 900) + 1}.${String(Math.floor(random() * 100)).padStart(2, "0")}`;
    const kind = random();
    let counterparty: string;
    let description: string;
    if (kind < 0.55) {
      counterparty = pick(SHORT);
      description = `card payment ${distinctWord(i)}`;
    } else if (kind < 0.85) {
      counterparty = pick(LONG);
      const words = Array.from({ length: 6 + Math.floor(random() * 10) }, () => pick(WORDS));
      description = `SEPA-Lastschrift ${words.join(" ")} ${Math.floor(random() * 1e9)}`.slice(0, 140);
    } else {
      counterparty = pick([...SHORT, ...LONG]);
      const words = Array.from({ length: 12 + Math.floor(random() * 12) }, () => pick(WORDS));
      description = `SEPA-Überweisung EREF+${Math.floor(random() * 1e12)} MREF+M-${i} SVWZ+${words.join(" ")}`.slice(
        0,
        140,
      );
    }
    lines.push([date, amount, "EUR", quote(counterparty), quote(description)].join(","));
  }
  return new TextEncoder().encode(lines.join("\n"));
}

type ChildMessage = { type: "ready" } | { type: "stopped" };

/** A worker process: one BullMQ Worker on `imports` until the parent says stop. */
async function child(): Promise<void> {
  const worker = await startImportsWorker();
  process.send!({ type: "ready" } satisfies ChildMessage);
  await new Promise<void>((resolve) => process.on("message", (m: { type: string }) => m.type === "stop" && resolve()));
  await worker.close();
  await new Promise<void>((resolve) => process.send!({ type: "stopped" } satisfies ChildMessage, () => resolve()));
  process.exit(0);
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const prefix = benchRedisPrefix("tokens");
  await dropDatabase(benchUrl);
  await migrate(benchUrl);
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_REDIS_PREFIX: prefix,
    BOUNDED_TIME_SCALE: String(SCALE),
    LOG_LEVEL: "silent",
    BOUNDED_PROVIDER_MODEL_CONCURRENCY: String(CONCURRENCY),
    BOUNDED_PROVIDER_MODEL_RPS: String(RPS),
    BOUNDED_SIM_MODEL_ERROR_RATE: "0",
    BOUNDED_BUDGET_IMPORTS_SOFT_S: String(BENCH_SOFT_S),
    // Measured on direct calls: with this budget an import would otherwise take the batch lane.
    BOUNDED_BATCH_LANE_KINDS: "none",
    BOUNDED_BUDGET_IMPORTS_HARD_S: String(BENCH_HARD_S),
  });
  // Bounded is told nothing about the token limit: it learns it from the answers.
  for (const v of [
    "BOUNDED_MODEL_TPM",
    "BOUNDED_MODEL_INPUT_TPM",
    "BOUNDED_MODEL_OUTPUT_TPM",
    "BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT",
    "BOUNDED_WORKER_QUEUES",
  ])
    delete process.env[v];
  const { db, closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis, redis, scanKeys } = await import("../lib/redis/client");
  const { closeQueues } = await import("../lib/queues/queues");
  const { createImport } = await import("../lib/imports/create-import");
  const { providerLimiter, providerWaitsKey } = await import("../lib/ratelimit/provider");
  const { KINDS } = await import("../lib/catalog/catalog");
  const { startSimulators } = await import("../workers/simulators/server");

  const sim = await startSimulators({
    model: { errorRate: 0, timeScale: SCALE, limits: { concurrency: CONCURRENCY, rps: RPS, tpm: TPM } },
  });
  const workers = Array.from({ length: WORKER_PROCESSES }, (_, i) =>
    fork(import.meta.filename, ["--child", String(i)], {
      cwd: REPO,
      execArgv: ["--import", import.meta.resolve("tsx")],
      env: { ...process.env, MODEL_BASE_URL: sim.modelBaseUrl },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }),
  );
  const said = (w: (typeof workers)[number], type: ChildMessage["type"]) =>
    new Promise<void>((resolve, reject) => {
      w.on("message", (m: ChildMessage) => m.type === type && resolve());
      w.once("exit", (code) => reject(new Error(`a worker process exited (${code}) before "${type}"`)));
    });
  await Promise.all(workers.map((w) => said(w, "ready")));

  const bytes = realisticCsv(ROWS);
  const created = await createImport({ tenant: "bench-tokens", filename: "tokens.csv", bytes });
  if (created.type !== "created") throw new Error(`the import was refused: ${created.message}`);
  const { jobId } = created;
  try {
    await withinCap(untilJobEnds(jobId), CAP_S * 1000 * SCALE, `the ${ROWS}-row import`);
    const stopped = Promise.all(
      workers.map((w) => {
        w.send({ type: "stop" });
        return said(w, "stopped");
      }),
    );
    await withinCap(stopped, STOP_CAP_MS, "the worker processes' stop");
  } catch (err) {
    for (const w of workers) w.kill();
    if (err instanceof BenchTimeout) {
      const row = await db().job.findUniqueOrThrow({
        where: { id: jobId },
        select: { status: true, processed: true, failed: true, message: true },
      });
      err.message += ` (cap ${CAP_S} production s): ${row.status}, ${row.processed + row.failed} of ${ROWS} rows, ${row.message ?? "no message"}`;
    }
    throw err;
  }
  const provider = await providerLimiter().peek("model");

  const job = await db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: {
      status: true,
      processed: true,
      failed: true,
      createdAt: true,
      finishedAt: true,
      attempt: true,
      reschedules: true,
    },
  });
  const [calls] = await db().$queryRaw<
    {
      calls: bigint;
      ok: bigint;
      prompt: bigint | null;
      completion: bigint | null;
      batch: number | null;
      mean: number | null;
    }[]
  >`
    SELECT count(*) AS calls, count(*) FILTER (WHERE outcome = 'ok') AS ok,
           sum("promptTokens") FILTER (WHERE outcome = 'ok') AS prompt, sum("completionTokens") FILTER (WHERE outcome = 'ok') AS completion,
           avg("batchSize") FILTER (WHERE outcome = 'ok')::float8 AS batch, avg("durationMs") FILTER (WHERE outcome = 'ok')::float8 AS mean
    FROM "ModelCall" WHERE "jobId" = ${jobId}::uuid AND type = 'model'`;
  const stats = (await (await fetch(`${sim.url}/v1/_stats`)).json()) as {
    admitted: number;
    tokensCharged: number;
    rejected: { total: number; concurrency: number; rate: number; tokens: number };
  };
  const waits = await redis().hmget(providerWaitsKey("model"), "waits", "waitMs", "gaveUp");

  await sim.close();
  await closeQueues();
  const cleanup = createRedis("producer", { enableOfflineQueue: true });
  for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
  await cleanup.quit();
  await closeRedis();
  await closeDb();
  await dropDatabase(benchUrl);

  const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const wallS = ((job.finishedAt?.getTime() ?? Date.now()) - job.createdAt.getTime()) / SCALE / 1000;
  const tokens = Number(calls!.prompt ?? 0) + Number(calls!.completion ?? 0);
  // The bucket starts full: a minute's worth of tokens goes without waiting.
  const idealS = (Math.max(0, tokens - TPM) / TPM) * 60;
  const ratio = wallS / idealS;
  const requests = stats.admitted + stats.rejected.total;
  const share429 = requests === 0 ? 0 : stats.rejected.total / requests;
  const learnt = provider.tokenLimits.budgets.find((b) => b.budget === "tokens");
  const rowBytes = bytes.byteLength / ROWS;

  console.log(
    `bench:tokens — time scale ${SCALE} (production seconds = real ÷ ${SCALE}); ${WORKER_PROCESSES} worker processes on one Redis and one PostgreSQL; simulator error rate 0`,
  );
  console.log(
    `provider: ${TPM.toLocaleString("en-US")} tokens per minute (the simulator's; Bounded told nothing), ${CONCURRENCY} calls in flight and ${RPS} requests/s (both sides); batches of up to ${KINDS.csv_import.modelBatch.size} rows`,
  );
  console.log(
    `import: ${ROWS} rows of ${f0(bytes.byteLength)} bytes (${f1(rowBytes)} bytes a row on average: short card payments, SEPA debits and transfers with long remittance text); ${job.status}, ${job.processed} processed, ${job.failed} failed; ${job.attempt} attempt(s), rescheduled ${job.reschedules} time(s)`,
  );
  console.log(
    `calls: ${Number(calls!.calls)} attempts recorded, ${Number(calls!.ok)} answered (${f2(calls!.batch ?? 0)} rows a call, mean ${f1((calls!.mean ?? 0) / SCALE / 1000)} s); the simulator admitted ${stats.admitted} and answered ${stats.rejected.total} with 429 (${stats.rejected.tokens} tokens, ${stats.rejected.rate} rate, ${stats.rejected.concurrency} in flight)`,
  );
  console.log(
    `tokens the rows took: ${f0(Number(calls!.prompt ?? 0))} prompt + ${f0(Number(calls!.completion ?? 0))} completion = ${f0(tokens)} (${f1(tokens / ROWS)} a row); the simulator charged ${f0(stats.tokensCharged)}`,
  );
  console.log(
    `learnt: ${learnt ? `${f0(learnt.limit)} tokens/min from the ${learnt.source}${learnt.announced ? `, last announced ${f0(learnt.announced.remaining)} remaining` : ""}` : "nothing (no token limit known at the end)"}; provider limiter: ${Number(waits[0] ?? 0)} calls waited, ${f1(Number(waits[1] ?? 0) / 1000)} s in all, ${Number(waits[2] ?? 0)} gave their slot back`,
  );
  console.log(
    `ideal = (tokens − the full bucket) ÷ limit = (${f0(tokens)} − ${f0(TPM)}) ÷ ${f0(TPM)} per min = ${f1(idealS)} s (the bucket starts full: ${f0((100 * TPM) / tokens)} % of the run's tokens need no wait)`,
  );
  console.log(`ratio_to_token_ideal = wall ÷ ideal = ${f1(wallS)} s ÷ ${f1(idealS)} s = ${f2(ratio)}`);
  console.log(
    `share_429 = 429 answers ÷ calls = ${stats.rejected.total} ÷ ${requests} = ${(share429 * 100).toFixed(2)} %`,
  );
  if (ratio > GOAL_RATIO) console.log(`goal missed: ratio ${f2(ratio)} > ${GOAL_RATIO}`);
  if (share429 > GOAL_SHARE_429)
    console.log(`goal missed: share of 429s ${(share429 * 100).toFixed(2)} % > ${GOAL_SHARE_429 * 100} %`);
  if (job.failed > 0) console.log(`goal missed: ${job.failed} rows failed`);
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")}; bench took ${f0((performance.now() - benchStarted) / 1000)} s`,
  );
  console.log(
    `RESULT bench=tokens ratio_to_token_ideal=${f2(ratio)} share_429=${share429.toFixed(4)} worker_processes=${WORKER_PROCESSES} rows_failed=${job.failed} wall_s=${f1(wallS)} ideal_s=${f1(idealS)} tokens=${tokens} tpm=${TPM} calls=${requests} status=${job.status} load1=${os.loadavg()[0]!.toFixed(1)}`,
  );
  if (job.status !== "completed" && job.status !== "completed_with_errors") process.exit(1);
}

if (process.argv[2] === "--child") {
  child().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    async (err: unknown) => {
      console.error(`FAIL bench=tokens: ${err instanceof Error ? err.message : String(err)}`);
      await dropDatabase(benchUrl).catch(() => undefined);
      process.exit(1);
    },
  );
}

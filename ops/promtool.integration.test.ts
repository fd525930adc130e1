import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants, readdirSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { closeDb } from "@/lib/db/client";
import { createMetrics } from "@/lib/metrics/metrics";
import { renderMetrics, snapshotKey, type MetricsSnapshot } from "@/lib/reports/metrics-publish";
import { closeRedis, redis } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { requiredTool } from "@/test/helpers/required-tool";

/**
 * Prometheus's own checks, with Prometheus's own tool: `promtool check rules` and `promtool test
 * rules` on every file of ops/prometheus, and `promtool check metrics` on what `GET /api/metrics`
 * serves (the web's registry merged with a worker's snapshot). `.ci/run` unpacks promtool from
 * Debian's `prometheus` package; under CI a missing promtool fails these tests. Elsewhere they run
 * when promtool is on PATH, at `BOUNDED_PROMTOOL`, or at `/tmp/prom/x/usr/bin/promtool`, and are
 * skipped otherwise, saying so.
 */

const RULES_DIR = join(import.meta.dirname, "prometheus");
const TESTS_DIR = join(RULES_DIR, "tests");

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findPromtool(): string | undefined {
  const candidates = [
    process.env.BOUNDED_PROMTOOL,
    ...(process.env.PATH ?? "")
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, "promtool")),
    "/tmp/prom/x/usr/bin/promtool",
  ];
  return candidates.find((c): c is string => !!c && executable(c));
}

const promtool = findPromtool();
const tool = requiredTool(
  "promtool",
  promtool,
  "prometheus",
  "PATH, at BOUNDED_PROMTOOL and /tmp/prom/x/usr/bin/promtool",
);

/** Runs promtool; returns its exit code and everything it printed. */
function run(args: string[], input?: string): { status: number | null; output: string } {
  const r = spawnSync(promtool!, args, { cwd: RULES_DIR, input, encoding: "utf8" });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

const ruleFiles = readdirSync(RULES_DIR).filter((f) => /\.ya?ml$/.test(f));
const testFiles = readdirSync(TESTS_DIR).filter((f) => /\.ya?ml$/.test(f));

interface Rule {
  alert?: string;
  record?: string;
}
interface RuleTestFile {
  tests?: {
    alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[];
    promql_expr_test?: { expr: string }[];
  }[];
}

afterAll(async () => {
  await closeRedis();
  await closeDb();
});

describe.skipIf(tool.skip)(`promtool (${tool.note})`, () => {
  beforeAll(tool.ensure);

  it.each(ruleFiles)("promtool check rules ops/prometheus/%s", (file) => {
    const { status, output } = run(["check", "rules", file]);
    expect(output).toContain("SUCCESS");
    expect(status, output).toBe(0);
  });

  it.each(testFiles)("promtool test rules ops/prometheus/tests/%s", (file) => {
    const { status, output } = run(["test", "rules", join("tests", file)]);
    expect(status, output).toBe(0);
  });

  it("every rule of ops/prometheus/*.yml has a unit test; every alert one in which it fires", () => {
    const rules = ruleFiles.flatMap((f) =>
      ((parse(readFileSync(join(RULES_DIR, f), "utf8")) as { groups?: { rules?: Rule[] }[] }).groups ?? []).flatMap(
        (g) => g.rules ?? [],
      ),
    );
    expect(rules.length).toBeGreaterThan(0);
    const tests = testFiles.flatMap(
      (f) => (parse(readFileSync(join(TESTS_DIR, f), "utf8")) as RuleTestFile).tests ?? [],
    );
    const firing = new Set(
      tests
        .flatMap((t) => t.alert_rule_test ?? [])
        .filter((a) => (a.exp_alerts ?? []).length > 0)
        .map((a) => a.alertname),
    );
    const exprs = tests.flatMap((t) => t.promql_expr_test ?? []).map((e) => e.expr);
    const untested = rules.filter((r) =>
      r.alert ? !firing.has(r.alert) : !exprs.some((e) => new RegExp(`\\b${r.record}\\b`).test(e)),
    );
    expect(untested.map((r) => r.alert ?? r.record)).toEqual([]);
  });

  it("promtool check metrics passes on GET /api/metrics: the web's registry and a worker's snapshot, merged", async () => {
    // A worker's snapshot in Redis, as startMetricsPublisher writes it, with a sample of everything.
    const worker = createMetrics(new Registry());
    worker.disableScrapeTimeGauges();
    worker.jobsFinished.inc({ kind: "csv_import", status: "completed" });
    worker.observeModelCall({ queue: "imports", jobKind: "csv_import", outcome: "ok", durationMs: scaled(5_500) });
    worker.rateLimitRescheduled({ queue: "marketplace-sync", family: "statistics" }, 60);
    worker.providerWaited({ provider: "model" }, 1);
    worker.observeReserveAge({ kind: "generate", end: "spent" }, 90);
    const snapshot: MetricsSnapshot = {
      role: "workers",
      host: "promtool-check",
      pid: 4242,
      at: new Date().toISOString(),
      metrics: await worker.registry.getMetricsAsJSON(),
    };
    const key = snapshotKey("promtool-check", 4242);
    await redis().set(key, JSON.stringify(snapshot), "PX", 60_000);
    try {
      // The web: its own registry with the database's scrape-time gauges, and an API request.
      const web = createMetrics(new Registry());
      web.observeRequest({ method: "GET", route: "/api/jobs/[id]", status: 200, seconds: 0.002 });
      const { text } = await renderMetrics({ metrics: web });
      expect(text).toMatch(/^bounded_jobs_finished_total\{.*process="workers-promtool-check-4242"/m);
      expect(text).toMatch(/^bounded_process_cpu_user_seconds_total\{process="web"\}/m);
      const { status, output } = run(["check", "metrics"], text);
      expect(output).toBe("");
      expect(status).toBe(0);
    } finally {
      await redis().del(key);
    }
  });
});

describe("promtool itself", () => {
  it.skipIf(tool.skip)("is a working binary", () => {
    tool.ensure();
    expect(execFileSync(promtool!, ["--version"], { encoding: "utf8" })).toMatch(/promtool, version/);
  });

  // .ci/run sets it: there a missing promtool fails the run instead of skipping these tests.
  it.skipIf(!process.env.BOUNDED_PROMTOOL)("is where BOUNDED_PROMTOOL says", () => {
    expect(promtool).toBe(process.env.BOUNDED_PROMTOOL);
  });
});

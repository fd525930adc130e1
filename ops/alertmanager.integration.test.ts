import { spawnSync } from "node:child_process";
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { requiredTool } from "@/test/helpers/required-tool";

/**
 * The Alertmanager routing file, checked with Alertmanager's own tool: `amtool check-config` on
 * it (and on it with the commented Slack and PagerDuty receivers switched on), and
 * `amtool config routes test` for every alert of ops/prometheus/alerts.yml: its `severity` label
 * takes it to the receiver of that name (page or ticket). `.ci/run` unpacks amtool from Debian's
 * `prometheus-alertmanager` package and sets BOUNDED_AMTOOL; under CI a missing amtool fails these
 * tests. Elsewhere they run when amtool is on PATH or in the cache `.ci/run` fills, and are
 * skipped otherwise, saying so.
 */

const CONFIG = join(import.meta.dirname, "alertmanager", "alertmanager.yml");
const ALERTS = join(import.meta.dirname, "prometheus", "alerts.yml");

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findAmtool(): string | undefined {
  const cache = join(
    process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"),
    "bounded",
    "alertmanager",
    "usr",
    "bin",
    "amtool",
  );
  const candidates = [
    process.env.BOUNDED_AMTOOL,
    ...(process.env.PATH ?? "")
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, "amtool")),
    cache,
  ];
  return candidates.find((c): c is string => !!c && executable(c));
}

const amtool = findAmtool();
const tool = requiredTool(
  "amtool",
  amtool,
  "prometheus-alertmanager",
  "PATH, at BOUNDED_AMTOOL and in ~/.cache/bounded/alertmanager",
);

function run(args: string[]): { status: number | null; output: string } {
  const r = spawnSync(amtool!, args, { encoding: "utf8" });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** The receiver `amtool config routes test` picks for an alert with these labels. */
function receiverFor(config: string, labels: Record<string, string>): string {
  const { status, output } = run([
    "config",
    "routes",
    "test",
    `--config.file=${config}`,
    ...Object.entries(labels).map(([k, v]) => `${k}=${v}`),
  ]);
  expect(status, output).toBe(0);
  // amtool warns on stderr that the file overrides --alertmanager.url; the receiver is stdout's first line.
  return output
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("Warning:"))[0]!
    .trim();
}

const scratch = mkdtempSync(join(tmpdir(), "bounded-amtool-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Rule {
  alert?: string;
  labels?: Record<string, string>;
}
const alerts = ((parse(readFileSync(ALERTS, "utf8")) as { groups: { rules: Rule[] }[] }).groups ?? [])
  .flatMap((g) => g.rules)
  .filter((r) => r.alert);

describe.skipIf(tool.skip)(`amtool (${tool.note})`, () => {
  beforeAll(tool.ensure);

  it("amtool check-config passes on ops/alertmanager/alertmanager.yml", () => {
    const { status, output } = run(["check-config", CONFIG]);
    expect(output).toContain("SUCCESS");
    expect(status, output).toBe(0);
  });

  it("the commented Slack and PagerDuty receivers are valid once uncommented", () => {
    const text = readFileSync(CONFIG, "utf8");
    const at = text.indexOf("\nreceivers:");
    const switchedOn = text.slice(0, at) + text.slice(at).replace(/^(\s+)# /gm, "$1");
    expect(switchedOn).toMatch(/^\s+pagerduty_configs:/m);
    expect(switchedOn).toMatch(/^\s+slack_configs:/m);
    const file = join(scratch, "alertmanager.yml");
    writeFileSync(file, switchedOn);
    const { status, output } = run(["check-config", file]);
    expect(status, output).toBe(0);
  });

  it("routes a page to the page receiver and a ticket to the ticket receiver; an unlabelled alert still becomes a ticket", () => {
    expect(receiverFor(CONFIG, { alertname: "BoundedJobsBudgetBurnFast", severity: "page", kind: "csv_import" })).toBe(
      "page",
    );
    expect(
      receiverFor(CONFIG, { alertname: "BoundedJobsBudgetBurnSlow", severity: "ticket", kind: "csv_import" }),
    ).toBe("ticket");
    expect(receiverFor(CONFIG, { alertname: "SomethingElse" })).toBe("ticket");
  });

  it("every alert of ops/prometheus/alerts.yml carries severity page or ticket and reaches that receiver", () => {
    expect(alerts.length).toBeGreaterThan(0);
    for (const rule of alerts) {
      const severity = rule.labels?.severity ?? "";
      expect(["page", "ticket"], `${rule.alert}: labels.severity`).toContain(severity);
      expect(receiverFor(CONFIG, { alertname: rule.alert!, severity }), rule.alert).toBe(severity);
    }
  });
});

describe("amtool itself", () => {
  // .ci/run sets it: there a missing amtool fails the run instead of skipping these tests.
  it.skipIf(!process.env.BOUNDED_AMTOOL)("is where BOUNDED_AMTOOL says, and runs", () => {
    expect(amtool).toBe(process.env.BOUNDED_AMTOOL);
    expect(run(["--version"]).output).toMatch(/amtool, version/);
  });
});

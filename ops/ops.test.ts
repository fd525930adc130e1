import { readFileSync } from "node:fs";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createMetrics } from "@/lib/metrics/metrics";

/**
 * The alert rules and the Grafana board name metrics by string; a renamed or misspelt metric
 * turns an alert silent or a panel empty without any error. These tests read both files, pull
 * every metric name out of every PromQL expression, and check it against the registry the app
 * builds (`createMetrics`, the function behind `processMetrics()`).
 */

const here = import.meta.dirname;
const alertsText = readFileSync(`${here}/prometheus/alerts.yml`, "utf8");
const boardText = readFileSync(`${here}/grafana/bounded.json`, "utf8");

// ---------------------------------------------------------------------------------------------
// PromQL: the metric selectors of an expression.

/** One vector selector: its metric name and the label names its matchers use. */
interface Selector {
  name: string;
  labels: string[];
}

const AGGREGATIONS = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "group",
  "stddev",
  "stdvar",
  "count",
  "count_values",
  "bottomk",
  "topk",
  "quantile",
  "limitk",
  "limit_ratio",
]);
/** Keywords followed by a parenthesised label list, not by an expression. */
const LABEL_LIST_KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);
const KEYWORDS = new Set([...LABEL_LIST_KEYWORDS, "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"]);

const IDENT = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const NUMBER =
  /^(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?(?:ms|[smhdwy])*(?:[0-9]+(?:ms|[smhdwy]))*)/;
const MATCHER = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)/g;

/** Index just past the quoted string starting at `i`. */
function skipString(s: string, i: number): number {
  const quote = s[i];
  let j = i + 1;
  while (j < s.length && s[j] !== quote) j += s[j] === "\\" && quote !== "`" ? 2 : 1;
  return j + 1;
}

/** Index just past the bracket group opening at `i` (strings inside are skipped whole). */
function skipGroup(s: string, i: number): number {
  const open = s[i]!;
  const close = ({ "(": ")", "[": "]", "{": "}" } as Record<string, string>)[open]!;
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j]!;
    if (c === '"' || c === "'" || c === "`") {
      j = skipString(s, j) - 1;
    } else if (c === open) depth++;
    else if (c === close && --depth === 0) return j + 1;
  }
  throw new Error(`unbalanced ${open} at ${i} in: ${s}`);
}

function nextNonSpace(s: string, i: number): number {
  while (i < s.length && /\s/.test(s[i]!)) i++;
  return i;
}

function matchers(group: string): { label: string; value: string }[] {
  return [...group.matchAll(MATCHER)].map((m) => ({ label: m[1]!, value: m[3]!.slice(1, -1) }));
}

/** Every vector selector of a PromQL expression (Grafana's `$variables` are allowed anywhere). */
function selectors(expr: string): Selector[] {
  const out: Selector[] = [];
  let i = 0;
  while (i < expr.length) {
    const rest = expr.slice(i);
    const c = expr[i]!;
    if (/\s/.test(c)) i++;
    else if (c === "#") i = expr.includes("\n", i) ? expr.indexOf("\n", i) : expr.length;
    else if (c === '"' || c === "'" || c === "`") i = skipString(expr, i);
    else if (c === "[")
      i = skipGroup(expr, i); // range or subquery: durations only
    else if (c === "$")
      i += rest.startsWith("${") ? skipGroup(expr, i + 1) - i : (rest.match(/^\$[a-zA-Z0-9_]+/)?.[0].length ?? 1);
    else if (c === "{") {
      // A selector without a metric name in front: `{__name__="…"}`.
      const end = skipGroup(expr, i);
      const m = matchers(expr.slice(i, end));
      const name = m.find((x) => x.label === "__name__")?.value;
      if (name) out.push({ name, labels: m.map((x) => x.label).filter((l) => l !== "__name__") });
      i = end;
    } else if (NUMBER.test(rest) && /[0-9.]/.test(c)) i += rest.match(NUMBER)![0].length;
    else if (IDENT.test(rest)) {
      const word = rest.match(IDENT)![0];
      const after = nextNonSpace(expr, i + word.length);
      const nextWord = expr.slice(after).match(IDENT)?.[0];
      if (LABEL_LIST_KEYWORDS.has(word)) {
        i = expr[after] === "(" ? skipGroup(expr, after) : after;
      } else if (KEYWORDS.has(word.toLowerCase())) {
        i = after;
      } else if (expr[after] === "(" || (AGGREGATIONS.has(word) && (nextWord === "by" || nextWord === "without"))) {
        i = after; // a function or an aggregation: its arguments are read as they come
      } else if (expr[after] === "{") {
        const end = skipGroup(expr, after);
        out.push({ name: word, labels: matchers(expr.slice(after, end)).map((x) => x.label) });
        i = end;
      } else {
        out.push({ name: word, labels: [] });
        i = after;
      }
    } else i++;
  }
  return out;
}

/** The selectors of a Grafana variable query: `label_values(metric, label)`, `query_result(expr)`, or PromQL. */
function variableSelectors(query: string): Selector[] {
  const labelValues = query.match(/^\s*label_values\s*\(([\s\S]*)\)\s*$/);
  if (labelValues) {
    const args = labelValues[1]!;
    const comma = args.lastIndexOf(",");
    return comma < 0 ? [] : selectors(args.slice(0, comma));
  }
  const queryResult = query.match(/^\s*query_result\s*\(([\s\S]*)\)\s*$/);
  return selectors(queryResult ? queryResult[1]! : query);
}

// ---------------------------------------------------------------------------------------------
// What the app exports: series names (histograms as `_bucket`, `_sum`, `_count`) and their labels.

/** Labels Prometheus itself attaches to every scraped series. */
const TARGET_LABELS = ["job", "instance"];

async function exportedSeries(): Promise<Map<string, Set<string>>> {
  const m = createMetrics(new Registry(), { countStuck: async () => ({}), callAllowances: async () => [] });
  const labelNames = new Map(
    m.registry
      .getMetricsAsArray()
      .map(
        (metric) => [metric.name, (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? []] as const,
      ),
  );
  const series = new Map<string, Set<string>>();
  for (const metric of await m.registry.getMetricsAsJSON()) {
    const labels = [...(labelNames.get(metric.name) ?? []), ...TARGET_LABELS];
    const add = (name: string, extra: string[] = []) => series.set(name, new Set([...labels, ...extra]));
    const type = String(metric.type);
    if (type === "histogram") {
      add(`${metric.name}_bucket`, ["le"]);
      add(`${metric.name}_sum`);
      add(`${metric.name}_count`);
    } else if (type === "summary") {
      add(metric.name, ["quantile"]);
      add(`${metric.name}_sum`);
      add(`${metric.name}_count`);
    } else add(metric.name);
  }
  return series;
}

/**
 * The exported series plus the series the recording rules of alerts.yml make, each with the
 * labels it keeps (`by (…)` of its expression, or the labels of what it is computed from).
 */
function withRecorded(series: Map<string, Set<string>>): Map<string, Set<string>> {
  const out = new Map(series);
  for (const r of rules) {
    if (!r.record) continue;
    const by = /\bby \(([^)]*)\)/.exec(String(r.expr));
    const labels = by
      ? by[1]!.split(",").map((l) => l.trim())
      : selectors(String(r.expr)).flatMap((x) => [...(out.get(x.name) ?? [])]);
    out.set(r.record, new Set(labels));
  }
  return out;
}

/** Problems with the selectors of one expression: unknown metrics, labels the metric does not have. */
function problems(where: string, found: Selector[], series: Map<string, Set<string>>): string[] {
  const out: string[] = [];
  for (const { name, labels } of found) {
    const known = series.get(name);
    if (!known) {
      out.push(`${where}: metric ${name} is not exported by the app`);
      continue;
    }
    for (const label of labels) if (!known.has(label)) out.push(`${where}: metric ${name} has no label "${label}"`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The two files.

interface Rule {
  alert?: string;
  record?: string;
  expr?: unknown;
  for?: unknown;
  labels?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}
const rules: Rule[] = ((parse(alertsText) as { groups?: { name: string; rules?: Rule[] }[] }).groups ?? []).flatMap(
  (g) => g.rules ?? [],
);

interface Panel {
  id?: number;
  title?: string;
  type?: string;
  datasource?: { type?: string; uid?: string } | string | null;
  targets?: { expr?: string; datasource?: { type?: string; uid?: string } }[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
  definition?: string;
}
const board = JSON.parse(boardText) as {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Variable[] };
  title: string;
  uid: string;
};
const allPanels = (list: Panel[]): Panel[] => list.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
const panels = allPanels(board.panels);

/** Every PromQL expression of the board, with where it is. */
function boardQueries(): { where: string; found: Selector[] }[] {
  const out: { where: string; found: Selector[] }[] = [];
  for (const p of panels)
    for (const t of p.targets ?? []) if (t.expr) out.push({ where: `panel "${p.title}"`, found: selectors(t.expr) });
  for (const v of board.templating.list) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : (v.query?.query ?? v.definition ?? "");
    out.push({ where: `variable $${v.name}`, found: variableSelectors(q) });
  }
  return out;
}

describe("the PromQL reader", () => {
  it("finds the metrics of an expression, not its functions, keywords, label lists, strings, numbers or variables", () => {
    expect(
      selectors(
        `histogram_quantile(0.99, sum by (queue, kind, le) (rate(a_seconds_bucket{type="model", kind=~"$kind|b_fake"}[$__rate_interval])))
           > on (queue, kind) group_left max by (queue) (b_budget) and on(kind) sum(increase(c_total[5m] offset 1h)) * 1e-3 >= bool 50
           unless count without (x) ({__name__="d_total", job="x"}) or absent(e_up)`,
      ),
    ).toEqual([
      { name: "a_seconds_bucket", labels: ["type", "kind"] },
      { name: "b_budget", labels: [] },
      { name: "c_total", labels: [] },
      { name: "d_total", labels: ["job"] },
      { name: "e_up", labels: [] },
    ]);
    expect(variableSelectors('label_values(x_total{kind!=""}, kind)')).toEqual([{ name: "x_total", labels: ["kind"] }]);
    expect(variableSelectors("label_values(kind)")).toEqual([]);
  });
});

describe("ops/prometheus/alerts.yml", () => {
  it("has the alerts on-call relies on", () => {
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        "BoundedJobsStuck",
        "BoundedModelCallsSlowerThanAllowance",
        "BoundedRescheduleStorm",
        "BoundedReserveLateRelease",
        "BoundedQueueBacklogOverBudget",
        "BoundedQueuePausedLong",
      ]),
    );
  });

  it("the SLO: recorded shares of jobs outside their soft budget per kind, and a fast burn that pages and a slow one that tickets", () => {
    const recorded = rules
      .filter((r) => r.record?.startsWith("kind:bounded_jobs_finished_over_budget:ratio_rate"))
      .map((r) => r.record);
    expect(recorded).toEqual(
      ["5m", "30m", "1h", "6h"].map((w) => `kind:bounded_jobs_finished_over_budget:ratio_rate${w}`),
    );
    const fast = rules.find((r) => r.alert === "BoundedJobsBudgetBurnFast");
    const slow = rules.find((r) => r.alert === "BoundedJobsBudgetBurnSlow");
    expect(String(fast?.expr)).toMatch(/ratio_rate1h > \(14\.4 \* 0\.01\)[\s\S]*ratio_rate5m > \(14\.4 \* 0\.01\)/);
    expect(String(slow?.expr)).toMatch(/ratio_rate6h > \(6 \* 0\.01\)[\s\S]*ratio_rate30m > \(6 \* 0\.01\)/);
    expect([fast?.labels?.severity, slow?.labels?.severity]).toEqual(["page", "ticket"]);
  });

  it("the backlog alert compares the oldest wait with the queue's budget and leaves paused queues out", () => {
    const rule = rules.find((r) => r.alert === "BoundedQueueBacklogOverBudget");
    const names = selectors(String(rule?.expr ?? "")).map((x) => x.name);
    expect(names).toEqual([
      "bounded_queue_oldest_waiting_seconds",
      "bounded_queue_soft_budget_seconds",
      "bounded_queue_paused",
    ]);
    expect(String(rule?.expr)).toMatch(/unless on \(queue\)/);
  });

  it("every alert has a for, a severity, and a summary and description that carry the numbers", () => {
    expect(rules.length).toBeGreaterThan(0);
    for (const r of rules) {
      if (r.record) continue;
      const name = r.alert ?? "(unnamed rule)";
      expect(r.alert, name).toMatch(/^[A-Za-z][A-Za-z0-9]*$/);
      expect(typeof r.expr === "string" && r.expr.trim().length > 0, `${name}: expr`).toBe(true);
      expect(String(r.for ?? ""), `${name}: for`).toMatch(/^(?:[0-9]+(?:ms|[smhdwy]))+$/);
      // page: someone acts now; ticket: within working hours (ops/alertmanager/alertmanager.yml routes on it).
      expect(["page", "ticket"], `${name}: labels.severity`).toContain(r.labels?.severity);
      const summary = r.annotations?.summary;
      const description = r.annotations?.description;
      expect(typeof summary === "string" && summary.trim().length > 0, `${name}: annotations.summary`).toBe(true);
      expect(typeof description === "string" && description.trim().length > 0, `${name}: annotations.description`).toBe(
        true,
      );
      expect(`${summary}`, `${name}: the summary says the value`).toContain("$value");
    }
  });

  it("every metric a rule names is one the app exports (or a rule of the file records), with the labels it matches on", async () => {
    const series = withRecorded(await exportedSeries());
    const found = rules.map((r) => ({ where: `rule ${r.alert ?? r.record}`, found: selectors(String(r.expr ?? "")) }));
    for (const { where, found: f } of found) expect(f.length, `${where} names no metric`).toBeGreaterThan(0);
    expect(found.flatMap(({ where, found: f }) => problems(where, f, series))).toEqual([]);
  });
});

describe("docs/operations.md → Alerts", () => {
  it("lists every alert of alerts.yml with its severity, in the table of who is told and what to do", () => {
    const operations = readFileSync(`${here}/../docs/operations.md`, "utf8");
    for (const r of rules.filter((x) => x.alert))
      expect(operations, `${r.alert} in the operations guide's alert table`).toMatch(
        new RegExp(`^\\| \`${r.alert}\` \\| ${String(r.labels?.severity)} \\|`, "m"),
      );
  });
});

describe("ops/grafana/bounded.json", () => {
  it("opens on the service level: the share of jobs inside their soft budget against the 99 % objective, and the burn rate", () => {
    const [row, share, burn] = board.panels;
    expect(row).toMatchObject({ type: "row", gridPos: { y: 0 } });
    expect(share!.targets![0]!.expr).toContain("kind:bounded_jobs_finished_within_budget:ratio_rate1h");
    expect(JSON.stringify(share)).toContain('"value":0.99');
    expect(burn!.targets![0]!.expr).toContain("kind:bounded_jobs_finished_over_budget:ratio_rate1h");
    expect(rules.map((r) => r.record)).toEqual(
      expect.arrayContaining([
        "kind:bounded_jobs_finished_within_budget:ratio_rate1h",
        "kind:bounded_jobs_finished_over_budget:ratio_rate1h",
      ]),
    );
  });

  it("is a Grafana dashboard on a Prometheus datasource variable", () => {
    expect(board.schemaVersion).toBeGreaterThanOrEqual(39);
    expect(board.uid).toBe("bounded-ops");
    const ds = board.templating.list.find((v) => v.type === "datasource");
    expect(ds).toMatchObject({ name: "datasource", query: "prometheus" });
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size, "panel ids are unique").toBe(ids.length);
    for (const p of panels) {
      if (p.type === "row") continue;
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, kept literally in the dashboard.
      expect(p.datasource, `panel "${p.title}"`).toEqual({ type: "prometheus", uid: "${datasource}" });
      expect(p.targets?.length ?? 0, `panel "${p.title}" has queries`).toBeGreaterThan(0);
    }
  });

  it("every metric a panel or variable queries is one the app exports (or alerts.yml records), with the labels it matches on", async () => {
    const series = withRecorded(await exportedSeries());
    const queries = boardQueries();
    expect(queries.length).toBeGreaterThan(10);
    for (const q of queries.filter((x) => x.where.startsWith("panel")))
      expect(q.found.length, `${q.where} names no metric`).toBeGreaterThan(0);
    expect(queries.flatMap(({ where, found }) => problems(where, found, series))).toEqual([]);
  });
});

describe("the queue gauges", () => {
  it("are registered with their labels, and the board draws depth by state and the oldest wait against the budget", async () => {
    const series = await exportedSeries();
    expect([...(series.get("bounded_queue_jobs") ?? [])]).toEqual(expect.arrayContaining(["queue", "state"]));
    for (const name of [
      "bounded_queue_oldest_waiting_seconds",
      "bounded_queue_soft_budget_seconds",
      "bounded_queue_paused",
    ])
      expect([...(series.get(name) ?? [])], name).toContain("queue");
    const queried = (p: Panel) => (p.targets ?? []).flatMap((t) => selectors(t.expr ?? "").map((x) => x.name));
    expect(panels.some((p) => queried(p).includes("bounded_queue_jobs"))).toBe(true);
    expect(
      panels.some(
        (p) =>
          queried(p).includes("bounded_queue_oldest_waiting_seconds") &&
          queried(p).includes("bounded_queue_soft_budget_seconds"),
      ),
    ).toBe(true);
  });
});

describe("both files", () => {
  it("name no bounded_ metric the app does not export, in comments, annotations and descriptions too", async () => {
    const series = await exportedSeries();
    const metricNames = new Set([...series.keys()].flatMap((s) => [s, s.replace(/_(bucket|sum|count)$/, "")]));
    // A recorded series (`kind:bounded_…:ratio_rate5m`) is the rules' own name, not an exported metric.
    const named = new Set(
      [...`${alertsText}\n${boardText}`.matchAll(/(?<!:)\bbounded_[a-z0-9_]+\b(?!:)/g)].map((m) => m[0]),
    );
    expect([...named].filter((n) => !metricNames.has(n))).toEqual([]);
  });
});

import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { processMetrics } from "@/lib/metrics/metrics";
import { route } from "./api";
import { ApiError } from "./errors";
import { UNNAMED_ROUTE, routePattern } from "./request-metrics";

const APP = join(import.meta.dirname, "..", "..", "app");

/** The value of one sample of this process's registry, matched by name and (a subset of) labels. */
async function sample(name: string, labels: Record<string, string>): Promise<number | undefined> {
  for (const line of (await processMetrics().registry.metrics()).split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const found = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(m[3]);
  }
  return undefined;
}

function routeFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? routeFiles(join(dir, e.name)) : e.name === "route.ts" ? [join(dir, e.name)] : [],
  );
}

describe("routePattern", () => {
  it("is the route's file path under app/, never a raw path", () => {
    expect(routePattern("GET /api/jobs/:id")).toBe("/api/jobs/[id]");
    expect(routePattern("GET /api/progress/:token/failed-rows.csv")).toBe("/api/progress/[token]/failed-rows.csv");
    expect(routePattern("route")).toBe(UNNAMED_ROUTE);
  });

  it("of every API route handler's name is the folder of its route.ts, with the method it is exported as", () => {
    const problems: string[] = [];
    let named = 0;
    for (const file of routeFiles(join(APP, "api"))) {
      const source = readFileSync(file, "utf8");
      if (!/\b(route|operatorRoute)\s*[<(]/.test(source)) continue; // answers without route(): not counted
      const folder = `/${relative(APP, file).split(sep).slice(0, -1).join("/")}`;
      const exported = [...source.matchAll(/export (?:const|async function) (GET|POST|PUT|PATCH|DELETE)\b/g)].map(
        (m) => m[1]!,
      );
      const names = [...source.matchAll(/"((GET|POST|PUT|PATCH|DELETE) \/api[^"]*)"/g)].map((m) => ({
        name: m[1]!,
        method: m[2]!,
      }));
      for (const method of exported)
        if (!names.some((n) => n.method === method))
          problems.push(`${folder}: ${method} has no "${method} /api/…" name`);
      for (const { name } of names)
        if (routePattern(name) !== folder)
          problems.push(`${folder}: named "${name}", counted as ${routePattern(name)}`);
      named += names.length;
    }
    expect(problems).toEqual([]);
    expect(named).toBeGreaterThan(20);
  });
});

describe("route()", () => {
  it("counts every answered request by method, route pattern and status, errors included, and times it", async () => {
    const labels = { method: "POST", route: "/api/request-metrics-test/[id]" };
    const ok = route("public", async () => new Response("made", { status: 201 }), "POST /api/request-metrics-test/:id");
    const missing = route(
      "public",
      async () => {
        throw new ApiError(404, "not_found", "No such thing.");
      },
      "POST /api/request-metrics-test/:id",
    );
    const before = (await sample("bounded_http_requests_total", { ...labels, status: "201" })) ?? 0;
    const request = () =>
      new Request("http://localhost/api/request-metrics-test/3f2a9c1e-0000-4000-8000-000000000000", { method: "POST" });
    expect((await ok(request(), {})).status).toBe(201);
    expect((await ok(request(), {})).status).toBe(201);
    expect((await missing(request(), {})).status).toBe(404);
    expect(await sample("bounded_http_requests_total", { ...labels, status: "201" })).toBe(before + 2);
    expect(await sample("bounded_http_requests_total", { ...labels, status: "404" })).toBeGreaterThanOrEqual(1);
    expect(await sample("bounded_http_request_duration_seconds_count", { ...labels, status: "201" })).toBe(before + 2);
    // The raw id is never a label.
    const text = await processMetrics().registry.metrics();
    expect(text).not.toContain("3f2a9c1e");
  });
});

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ENV_VARIABLES, parseEnv } from "@/lib/env";

// compose.yaml and the Dockerfile against what the app really reads and runs: a variable the app
// does not know is silently ignored, and a command that is not a script fails only at deploy time.
const root = join(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(join(root, file), "utf8");

interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: unknown;
  environment?: Record<string, string | number | boolean | null> | string[];
  volumes?: string[];
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }> | string[];
}

// Merge keys (`<<: *bounded`) as compose reads them.
const compose = parse(read("compose.yaml"), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const own = Object.entries(services).filter(([, s]) => s.image === "bounded:local");
const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);

function environment(s: Service): Record<string, string> {
  const entries = Array.isArray(s.environment)
    ? s.environment.map((line) => line.split(/=(.*)/s).slice(0, 2) as [string, string])
    : Object.entries(s.environment ?? {}).map(([k, v]) => [k, v === null ? "" : String(v)] as [string, string]);
  return Object.fromEntries(entries);
}

/** `${NAME:-default}` as compose resolves it when NAME is unset. */
const withDefaults = (value: string) =>
  value.replace(/\$\{[A-Z0-9_]+(?::?-([^}]*))?\}/g, (_, fallback: string | undefined) => fallback ?? "");

describe("compose.yaml", () => {
  it("runs the web, the migration, the simulators and several workers from the image", () => {
    expect(own.map(([name]) => name).sort()).toEqual(["migrate", "simulators", "web", "workers"]);
    expect(services.workers!.deploy?.replicas).toBeGreaterThanOrEqual(3);
    for (const name of ["web", "workers"])
      expect(services[name]!.depends_on).toMatchObject({ migrate: { condition: "service_completed_successfully" } });
    for (const name of ["postgres", "redis", "prometheus", "grafana"]) expect(services[name], name).toBeDefined();
  });

  it("sets only variables lib/env.ts knows, with values it accepts", () => {
    for (const [name, s] of own) {
      const env = environment(s);
      const unknown = Object.keys(env).filter((k) => !(ENV_VARIABLES as string[]).includes(k));
      expect(unknown, `${name}: unknown variables`).toEqual([]);
      expect(
        () => parseEnv(Object.fromEntries(Object.entries(env).map(([k, v]) => [k, withDefaults(v)]))),
        name,
      ).not.toThrow();
    }
  });

  it("runs only package.json scripts", () => {
    for (const [name, s] of own) {
      expect(s.entrypoint, `${name}: no entrypoint of its own`).toBeUndefined();
      const command = s.command;
      expect(Array.isArray(command), `${name}: an exec-form command`).toBe(true);
      const [npm, run, script] = command as string[];
      expect([npm, run], name).toEqual(["npm", "run"]);
      expect(scripts, `${name}: "${script}" is a script`).toContain(script);
    }
    const cmd = /^CMD (\[.*\])$/m.exec(read("Dockerfile"))?.[1];
    const [npm, run, script] = JSON.parse(cmd!) as string[];
    expect([npm, run]).toEqual(["npm", "run"]);
    expect(scripts).toContain(script);
  });

  it("points the workers at services that exist, and mounts files that exist", () => {
    const env = environment(services.workers!);
    for (const v of [
      "MODEL_BASE_URL",
      "OCR_BASE_URL",
      "MARKETPLACE_BASE_URL",
      "IMAGE_PROVIDER_BASE_URL",
      "DATABASE_URL",
      "REDIS_URL",
    ]) {
      expect(Object.keys(services), v).toContain(new URL(withDefaults(env[v]!)).hostname);
    }
    expect(environment(services.simulators!).BOUNDED_SIM_HOST).toBe("0.0.0.0");
    for (const s of Object.values(services)) {
      for (const volume of s.volumes ?? [])
        if (volume.startsWith("./")) expect(existsSync(join(root, volume.split(":")[0]!)), volume).toBe(true);
    }
  });

  it("has Prometheus scrape the web's /api/metrics and load the alert rules", () => {
    const prometheus = parse(read("ops/compose/prometheus.yml")) as {
      rule_files: string[];
      scrape_configs: { metrics_path: string; static_configs: { targets: string[] }[] }[];
    };
    const job = prometheus.scrape_configs[0]!;
    expect(job.metrics_path).toBe("/api/metrics");
    expect(job.static_configs[0]!.targets).toEqual([`web:${environment(services.web!).PORT}`]);
    expect(services.prometheus!.volumes).toContain("./ops/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro");
    expect(prometheus.rule_files).toEqual(["/etc/prometheus/alerts.yml"]);
  });

  it("runs Alertmanager with the routing file, and Prometheus sends its alerts there", () => {
    const prometheus = parse(read("ops/compose/prometheus.yml")) as {
      alerting?: { alertmanagers: { static_configs: { targets: string[] }[] }[] };
    };
    const am = services.alertmanager!;
    expect(am.image).toMatch(/^prom\/alertmanager:v\d+\.\d+\.\d+$/);
    expect(am.volumes).toContain("./ops/alertmanager/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro");
    expect(am.command).toContain("--config.file=/etc/alertmanager/alertmanager.yml");
    const [target] = prometheus.alerting!.alertmanagers[0]!.static_configs[0]!.targets;
    expect(Object.keys(services)).toContain(target!.split(":")[0]);
    expect(target!.split(":")[1]).toBe("9093");
  });
});

describe("Dockerfile", () => {
  const dockerfile = read("Dockerfile");
  it("builds in stages and runs as a non-root user in production mode, without the Prisma engine", () => {
    expect([...dockerfile.matchAll(/^FROM .* AS (\w+)$/gm)].map((m) => m[1])).toEqual(["deps", "build", "runtime"]);
    const runtime = dockerfile.slice(dockerfile.indexOf("AS runtime"));
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/NODE_ENV=production/);
    expect(dockerfile).toMatch(/PRISMA_SCHEMA_ENGINE_BINARY=\/bin\/false/);
    expect(dockerfile).toMatch(/next build/);
  });

  it("leaves local installs, builds and secrets out of the build context", () => {
    const ignored = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim());
    for (const entry of ["node_modules", ".next", ".env", ".git"]) expect(ignored).toContain(entry);
    expect(ignored).toContain("!.env.example");
  });
});

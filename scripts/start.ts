/**
 * `npm start`: checks → migrations → first-start bootstrap → build if needed → web + workers +
 * simulators. A part that exits is started again with backoff, a crash loop reported loudly
 * (./supervise.ts); it never stops the others. Ctrl-C or SIGTERM stops all of them (each in its
 * own process group, so no `next-server` is left behind). `tsx scripts/start.ts web|workers|sim`
 * runs one part alone, supervised the same way.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { needsBuild } from "./build";
import { loadDotEnv, preflight, fail } from "./preflight";
import { RestartTracker } from "./supervise";
import type { Env } from "@/lib/env";

const root = resolve(import.meta.dirname, "..");
loadDotEnv(root);

type Part = "web" | "workers" | "sim" | "demo";
const ALL: Part[] = ["sim", "workers", "web"];
const args = process.argv.slice(2);
/** `--no-build`: serve the build that is there, even if a source is newer (a second system beside a running one). */
const noBuild = args.includes("--no-build");
const requested = args.filter((a) => a !== "--no-build");
if (requested.some((p) => ![...ALL, "demo"].includes(p as Part)))
  fail(`unknown part "${requested.join(" ")}"; use web, workers, sim or demo`);
const parts: Part[] = requested.length ? (requested as Part[]) : [...ALL];

const tsx = ["--import", "tsx"];
const nextBin = join(root, "node_modules/next/dist/bin/next");

function run(cmd: string, args: string[], label: string): void {
  const result = spawnSync(cmd, args, {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
  });
  if (result.status !== 0) fail(`${label} failed (exit ${result.status ?? result.signal}).`);
}

/** What the supervisor keeps while the parts run: shared by launching, stopping and waiting for the web. */
interface Supervision {
  children: Map<Part, ChildProcess>;
  commands: Record<Part, string[]>;
  trackers: Map<Part, RestartTracker>;
  pendingRestarts: Set<NodeJS.Timeout>;
  stopping: boolean;
}

/** Whether a part's process is still there to stop. */
const running = (c: ChildProcess | undefined): c is ChildProcess =>
  !!c?.pid && c.exitCode === null && c.signalCode === null;
/** Resolves when a part's process has exited (at once when it already has). */
const exited = (c: ChildProcess) =>
  new Promise<void>((resolve) => (running(c) ? c.once("exit", () => resolve()) : resolve()));

/** The checks: the services the parts need answer (./preflight.ts), and a warning when time is scaled. */
async function check(): Promise<Env> {
  const e = await preflight({ postgres: parts.some((p) => p !== "sim"), redis: parts.some((p) => p !== "sim") });
  if (e.BOUNDED_TIME_SCALE !== 1) {
    console.warn(`\n  ⚠ BOUNDED_TIME_SCALE=${e.BOUNDED_TIME_SCALE}: every budget, latency and interval is scaled.\n`);
  }
  return e;
}

/** Prisma's client when it is missing, the migrations and the first-start bootstrap: for the web and the workers. */
function prepareDatabase(): void {
  if (parts.includes("web") || parts.includes("workers")) {
    if (!existsSync(join(root, "generated/prisma/client.ts"))) run("npx", ["prisma", "generate"], "prisma generate");
    run(process.execPath, [...tsx, "scripts/db/migrate.ts"], "Database migration");
    run(process.execPath, [...tsx, "scripts/bootstrap.ts"], "First-start bootstrap");
  }
}

/** Adds the demo traffic to the parts to start. */
function addDemo(e: Env): void {
  // The whole system shows demo traffic unless told otherwise (BOUNDED_DEMO=0); a part alone does not.
  if (!requested.length && e.BOUNDED_DEMO) parts.push("demo");
}

/** The web app's build: refused under --no-build when there is none, made when a source is newer than it. */
function build(): void {
  if (parts.includes("web") && noBuild && !existsSync(join(root, ".next/BUILD_ID")))
    fail("--no-build, but there is no build: run `npx next build` first.");
  if (parts.includes("web") && !noBuild && needsBuild(root)) {
    console.log("Building the web app (next build)…");
    run(process.execPath, [nextBin, "build"], "next build");
  }
}

/** Starts every part, supervised, and stops them all on Ctrl-C, SIGTERM or SIGHUP. */
function startParts(e: Env): Supervision {
  const s: Supervision = {
    children: new Map(),
    commands: {
      sim: [...tsx, "workers/simulators/main.ts"],
      workers: [...tsx, `--max-old-space-size=${e.BOUNDED_WORKER_HEAP_MB}`, "workers/main.ts"],
      demo: [...tsx, "workers/demo/main.ts"],
      web: [nextBin, "start", "--port", String(e.PORT)],
    },
    trackers: new Map(),
    pendingRestarts: new Set(),
    stopping: false,
  };
  for (const part of parts) launch(s, part);
  process.on("SIGINT", () => void stop(s, 0));
  process.on("SIGTERM", () => void stop(s, 0));
  process.on("SIGHUP", () => void stop(s, 0));
  return s;
}

/** Stops every part, the demo and the workers first, and exits with `code`. */
async function stop(s: Supervision, code: number): Promise<void> {
  // The demo stops first (no new work), then the workers: their running jobs may still call the
  // simulators and write through the web's database while they wind down. Then the rest. Anything still alive after 20 s is killed.
  if (s.stopping) return;
  s.stopping = true;
  for (const timer of s.pendingRestarts) clearTimeout(timer);
  const force = setTimeout(() => {
    for (const child of s.children.values()) if (running(child)) killGroup(child.pid!, "SIGKILL");
  }, 20_000);
  force.unref();
  for (const first of ["demo", "workers"] as const) {
    const child = s.children.get(first);
    if (running(child)) {
      killGroup(child.pid!, "SIGTERM");
      await exited(child);
    }
  }
  const rest = [...s.children.values()].filter(running);
  for (const child of rest) killGroup(child.pid!, "SIGTERM");
  await Promise.all(rest.map(exited));
  process.exit(code);
}

/** Starts one part, and starts it again when it exits. */
function launch(s: Supervision, part: Part): void {
  // A part that exits is started again with backoff (./supervise.ts); the demo traffic is not: the system goes on without it.
  // detached: each part leads its own process group, so stopping it stops its children too.
  const child = spawn(process.execPath, s.commands[part], {
    cwd: root,
    stdio: "inherit",
    detached: true,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", NODE_ENV: "production" },
  });
  s.children.set(part, child);
  const tracker = s.trackers.get(part) ?? new RestartTracker(part);
  s.trackers.set(part, tracker);
  tracker.started(Date.now());
  console.log(`bounded: started ${part} (pid ${child.pid})`);
  child.on("exit", (code, signal) => {
    if (s.stopping) return;
    // Whatever the part left in its group (a next-server child holding the port) goes with it.
    killGroup(child.pid!, "SIGKILL");
    if (part === "demo") {
      console.error(`bounded: the demo traffic stopped (${signal ?? `code ${code}`}); the system goes on without it.`);
      return;
    }
    // A dead worker process's jobs resume from their cursors on the others or on its replacement.
    const decision = tracker.exited({ code, signal }, Date.now());
    console.error(decision.line);
    const timer = setTimeout(() => {
      s.pendingRestarts.delete(timer);
      if (!s.stopping) launch(s, part);
    }, decision.delayMs);
    s.pendingRestarts.add(timer);
  });
}

/** Waits for the web app to answer (120 tries half a second apart, until stopped), then says where it is. */
async function announceWeb(e: Env, s: Supervision): Promise<void> {
  if (parts.includes("web")) {
    const url = `http://localhost:${e.PORT}`;
    for (let i = 0; i < 120 && !s.stopping; i++) {
      const ok = await fetch(`${url}/api/health`).then(
        (r) => r.status < 500,
        () => false,
      );
      if (ok) {
        console.log(
          `\n  Bounded is running at ${url}\n  Upload a CSV: ${url}/upload\n  Operators sign in at ${url}/login (user "admin"; password from BOUNDED_ADMIN_PASSWORD, or the one printed at first start; more users: npm run users -- add <name> --role operator)\n  Stop with Ctrl-C.\n`,
        );
        break;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** The start-up steps, in order: checks, migrations, demo traffic, build, the parts, then the web's address. */
async function main() {
  const e = await check();
  prepareDatabase();
  addDemo(e);
  build();
  const supervision = startParts(e);
  await announceWeb(e, supervision);
}

function killGroup(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

main().catch((err) => fail(err instanceof Error ? err.message : String(err)));

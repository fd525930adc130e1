/**
 * The system a chaos run attacks: a Redis server of its own (so it can be killed), the
 * simulators, the web app (`next start` on the existing build) and N worker processes, each in
 * its own process group so SIGKILL takes the whole part down at once, as an out-of-memory kill or
 * a lost machine would. Output goes to one log file per process under `test-results/<database>/`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { needsBuild } from "../../scripts/build";
import { parseEnv } from "../../lib/env";
import { REDIS_LATENCY_THRESHOLD_MS } from "./redis-stalls";

export const ROOT = resolve(import.meta.dirname, "../..");
const NEXT_BIN = join(ROOT, "node_modules/next/dist/bin/next");

export interface ChaosPorts {
  web: number;
  sim: number;
  redis: number;
}

type Part = "redis" | "sim" | "web" | `worker-${number}`;

interface Proc {
  part: Part;
  child: ChildProcess;
  /** Resolves when the process said it is ready (or rejects when it exits first). */
  ready: Promise<void>;
  isReady: boolean;
  exited: boolean;
}

/**
 * Systems not stopped yet. A run that is stopped (Ctrl-C, a kill) takes their parts down with it
 * on its way out: left behind, they hold the ports the next run needs, and a process whose logs go
 * nowhere spins.
 */
const running = new Set<ChaosSystem>();
process.once("exit", () => {
  for (const system of running) system.killAllNow();
});

export class ChaosSystem {
  readonly env: Record<string, string>;
  readonly logDir: string;
  private readonly procs = new Map<Part, Proc>();
  private readonly redisDir: string;
  private generation = 0;
  private stopping = false;
  /** Worker processes that exited without being killed by the run (a crash under chaos). */
  readonly unexpectedExits: { part: Part; code: number | null; signal: string | null }[] = [];

  constructor(
    readonly ports: ChaosPorts,
    env: Record<string, string>,
    readonly workerCount: number,
  ) {
    this.logDir = join(ROOT, "test-results", new URL(env.DATABASE_URL!).pathname.slice(1));
    this.redisDir = join(this.logDir, "redis-data");
    this.env = { ...env, REDIS_URL: `redis://127.0.0.1:${ports.redis}` };
    running.add(this);
  }

  /** SIGKILL to every part still running, at once and synchronously (for a process on its way out). */
  killAllNow(): void {
    for (const p of this.procs.values())
      if (!p.exited)
        try {
          process.kill(-p.child.pid!, "SIGKILL");
        } catch {
          /* already gone */
        }
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.ports.web}`;
  }

  workers(): Part[] {
    return Array.from({ length: this.workerCount }, (_, i) => `worker-${i + 1}` as Part);
  }

  readyWorkers(): Part[] {
    return this.workers().filter((p) => this.procs.get(p)?.isReady && !this.procs.get(p)?.exited);
  }

  /** Starts Redis and the simulators, runs `beforeApps` (a first start's bootstrap), then the web and the workers. */
  async start(beforeApps: () => void = () => undefined): Promise<void> {
    rmSync(this.logDir, { recursive: true, force: true });
    mkdirSync(this.redisDir, { recursive: true });
    await this.launch("redis");
    await this.launch("sim");
    beforeApps();
    await Promise.all([this.launch("web"), ...this.workers().map((w) => this.launch(w))]);
  }

  /** SIGKILL to the part's whole process group; resolves when it is gone. */
  async kill(part: Part): Promise<void> {
    const p = this.procs.get(part);
    if (!p || p.exited) return;
    const gone = new Promise<void>((r) => p.child.once("exit", () => r()));
    try {
      process.kill(-p.child.pid!, "SIGKILL");
    } catch {
      /* already gone */
    }
    await gone;
  }

  /**
   * SIGSTOP to the part's process group for `ms`, then SIGCONT: a process that hangs without
   * dying (its connections stay open, nothing answers), as a provider frozen mid-call does.
   */
  async freeze(part: Part, ms: number): Promise<void> {
    const p = this.procs.get(part);
    if (!p || p.exited) return;
    process.kill(-p.child.pid!, "SIGSTOP");
    try {
      await sleep(ms);
    } finally {
      process.kill(-p.child.pid!, "SIGCONT");
    }
  }

  /** Kill, wait `downMs`, start again; resolves when the new process is ready. */
  async restart(part: Part, downMs: number): Promise<void> {
    await this.kill(part);
    await sleep(downMs);
    await this.launch(part);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    running.delete(this);
    // Workers first (their jobs stop), then the rest; SIGKILL: what is checked is in PostgreSQL.
    for (const part of [...this.workers(), "web", "sim", "redis"] as Part[]) await this.kill(part);
  }

  private command(part: Part): { cmd: string; args: string[]; readyWhen: (line: string) => boolean } {
    const tsx = ["--import", "tsx"];
    if (part === "redis") {
      // As BullMQ asks of production Redis: append-only file, fsync every second, no eviction.
      // A SIGKILL can lose up to a second of writes; the restart replays the rest.
      return {
        cmd: "redis-server",
        args: [
          "--port",
          String(this.ports.redis),
          "--bind",
          "127.0.0.1",
          "--save",
          "",
          "--appendonly",
          "yes",
          "--appendfsync",
          "everysec",
          "--maxmemory-policy",
          "noeviction",
          // Its own record of every stall, read by test/chaos/redis-stalls.ts.
          "--latency-monitor-threshold",
          String(REDIS_LATENCY_THRESHOLD_MS),
          "--dir",
          this.redisDir,
        ],
        readyWhen: (l) => l.includes("Ready to accept connections"),
      };
    }
    if (part === "sim")
      return {
        cmd: process.execPath,
        args: [...tsx, "workers/simulators/main.ts"],
        readyWhen: (l) => l.includes("simulators listening"),
      };
    if (part === "web")
      return {
        cmd: process.execPath,
        args: [NEXT_BIN, "start", "--port", String(this.ports.web)],
        readyWhen: (l) => /Ready in|started server/i.test(l),
      };
    return {
      cmd: process.execPath,
      args: [
        ...tsx,
        `--max-old-space-size=${parseEnv({ ...process.env, ...this.env }).BOUNDED_WORKER_HEAP_MB}`,
        "workers/main.ts",
      ],
      readyWhen: (l) => l.includes('"workers started"'),
    };
  }

  private launch(part: Part): Promise<void> {
    const { cmd, args, readyWhen } = this.command(part);
    const log = createWriteStream(join(this.logDir, `${part}.log`), { flags: "a" });
    log.write(`\n--- start #${++this.generation} at ${new Date().toISOString()}\n`);
    const child = spawn(cmd, args, {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...this.env, NODE_ENV: "production", NEXT_TELEMETRY_DISABLED: "1" },
    });
    const proc: Proc = { part, child, isReady: false, exited: false, ready: Promise.resolve() };
    proc.ready = new Promise<void>((resolveReady, rejectReady) => {
      let buffer = "";
      const onData = (chunk: Buffer) => {
        log.write(chunk);
        if (proc.isReady) return;
        buffer += chunk.toString("utf8");
        const lines = buffer.split("\n");
        buffer = lines.pop() ?? "";
        if (lines.some(readyWhen)) {
          proc.isReady = true;
          resolveReady();
        }
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("exit", (code, signal) => {
        proc.exited = true;
        log.end(`--- exit ${signal ?? code} at ${new Date().toISOString()}\n`);
        if (!proc.isReady)
          rejectReady(
            new Error(
              `${part} exited (${signal ?? code}) before it was ready; see ${join(this.logDir, `${part}.log`)}`,
            ),
          );
        // A worker that dies on its own under chaos is replaced, as `npm start` does; counted.
        if (signal !== "SIGKILL" && !this.stopping && part.startsWith("worker-")) {
          this.unexpectedExits.push({ part, code, signal });
          if (this.procs.get(part) === proc) void this.launch(part).catch(() => undefined);
        }
      });
    });
    this.procs.set(part, proc);
    const timeout = sleep(120_000).then(() => {
      if (!proc.isReady) throw new Error(`${part} was not ready within 120 s; see ${join(this.logDir, `${part}.log`)}`);
    });
    return Promise.race([proc.ready, timeout]);
  }
}

/** `next build` when there is none or a source is newer (the same rule as `npm start`). */
export function ensureBuild(): void {
  if (!needsBuild(ROOT)) return;
  console.log("chaos: building the web app (next build)…");
  const r = spawnSync(process.execPath, [NEXT_BIN, "build"], {
    cwd: ROOT,
    stdio: "inherit",
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" },
  });
  if (r.status !== 0) throw new Error(`next build failed (exit ${r.status ?? r.signal})`);
}

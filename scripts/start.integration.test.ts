import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";

// `npm start`'s supervisor for real: it runs the simulators alone (no database or Redis needed),
// one of them is killed with SIGKILL, and the supervisor must start it again; and it starts the
// worker process with the heap limit the environment names.
const root = `${import.meta.dirname}/..`;
let supervisor: ChildProcess | undefined;

afterEach(() => {
  if (supervisor?.pid && supervisor.exitCode === null && supervisor.signalCode === null)
    process.kill(supervisor.pid, "SIGKILL");
});

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("npm start's supervisor", () => {
  it("starts a part killed with SIGKILL again, says so on stderr, and still stops everything on SIGTERM", async () => {
    const port = await freePort();
    const stats = () =>
      fetch(`http://127.0.0.1:${port}/marketplace/_stats`).then(
        (r) => r.ok,
        () => false,
      );
    supervisor = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts", "sim"], {
      cwd: root,
      env: { ...process.env, BOUNDED_SIM_PORT: String(port), LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    supervisor.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    supervisor.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const pids = () => [...out.matchAll(/bounded: started sim \(pid (\d+)\)/g)].map((m) => Number(m[1]));

    await waitFor(async () => pids().length === 1 && (await stats()), {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: "the simulators to answer",
    });
    const [first] = pids();
    process.kill(first!, "SIGKILL");

    await waitFor(async () => pids().length === 2 && (await stats()), {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: "the simulators to be started again",
    });
    expect(err).toContain("bounded: sim exited (signal SIGKILL, after ");
    expect(err).toContain("restarting it in 1 s.");
    const second = pids()[1]!;
    expect(second).not.toBe(first);

    supervisor.kill("SIGTERM");
    const code = await new Promise<number | null>((resolve) => supervisor!.once("exit", (c) => resolve(c)));
    expect(code).toBe(0);
    expect(alive(second)).toBe(false);
  }, 90_000);

  it("starts the worker process with its heap bounded by BOUNDED_WORKER_HEAP_MB", async () => {
    supervisor = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts", "workers"], {
      cwd: root,
      // This test worker's own database and Redis prefix (inherited); nothing is enqueued there.
      env: { ...process.env, BOUNDED_WORKER_HEAP_MB: "321", BOUNDED_DEMO: "0", LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    supervisor.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    supervisor.stderr!.on("data", () => undefined);
    const pid = () => Number(/bounded: started workers \(pid (\d+)\)/.exec(out)?.[1] ?? 0);
    await waitFor(() => pid() > 0, { timeoutMs: 60_000, intervalMs: 100, what: "the worker process to start" });
    const args = readFileSync(`/proc/${pid()}/cmdline`, "utf8").split("\0");
    expect(args).toContain("--max-old-space-size=321");
    expect(args.at(-2)).toBe("workers/main.ts");

    supervisor.kill("SIGTERM");
    const code = await new Promise<number | null>((resolve) => supervisor!.once("exit", (c) => resolve(c)));
    expect(code).toBe(0);
  }, 90_000);
});

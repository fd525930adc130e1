import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { EnvError, parseEnv } from "@/lib/env";
import { checkWorkers } from "@/lib/reports/health";
import { livePresences, presenceKeys } from "@/lib/queues/presence";
import { QUEUE_NAMES } from "@/lib/catalog/catalog";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis, redis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";

/**
 * `BOUNDED_WORKER_QUEUES`: a worker process (workers/main.ts, a real process) consumes only the
 * queues it names, and says so in its presence, which readiness reads per queue.
 */

const root = path.resolve(import.meta.dirname, "..");
const children: ChildProcess[] = [];

async function clearPresences(): Promise<void> {
  await redis().del(...presenceKeys());
}

function startWorkers(queues: string): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
    cwd: root,
    env: { ...process.env, BOUNDED_WORKER_QUEUES: queues, LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return { child, output: () => out, exited: new Promise((resolve) => child.once("exit", resolve)) };
}

beforeAll(clearPresences);
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
  await clearPresences();
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

describe("BOUNDED_WORKER_QUEUES", () => {
  it("is every queue of the catalog by default, the named ones when set, and a clear error naming the queues for an unknown one", () => {
    expect(parseEnv({}).BOUNDED_WORKER_QUEUES).toEqual(QUEUE_NAMES);
    expect(parseEnv({ BOUNDED_WORKER_QUEUES: " imports, documents ,imports" }).BOUNDED_WORKER_QUEUES).toEqual([
      "imports",
      "documents",
    ]);
    expect(() => parseEnv({ BOUNDED_WORKER_QUEUES: "imports,import" })).toThrow(EnvError);
    expect(() => parseEnv({ BOUNDED_WORKER_QUEUES: "imports,import" })).toThrow(
      `BOUNDED_WORKER_QUEUES: unknown queue "import"; the queues are ${QUEUE_NAMES.join(", ")}`,
    );
    expect(() => parseEnv({ BOUNDED_WORKER_QUEUES: " , " })).toThrow(/names no queue/);
  });

  it("a worker process started with documents only consumes documents, announces only it, and readiness still names every other queue as having no live worker", async () => {
    const { child, exited } = startWorkers("documents");
    const [presence] = await waitFor(
      async () => {
        const found = await livePresences();
        return found.length > 0 ? found : null;
      },
      { timeoutMs: 60_000, what: "the worker process's presence", intervalMs: 100 },
    );
    expect(presence!.pid).toBe(child.pid);
    expect(presence!.queues).toEqual(["documents"]);
    await waitFor(async () => (await queue("documents").getWorkersCount()) > 0, {
      timeoutMs: 30_000,
      what: "a BullMQ worker on documents",
      intervalMs: 100,
    });
    expect(await queue("imports").getWorkersCount()).toBe(0);
    expect(await checkWorkers(["documents"])).toMatchObject({ ok: true });
    const others = QUEUE_NAMES.filter((q) => q !== "documents");
    expect(await checkWorkers()).toEqual({ ok: false, error: `no live worker for ${others.join(", ")}` });
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 120_000);

  it("a worker process given a queue the catalog does not know refuses to start, naming it", async () => {
    const { output, exited } = startWorkers("imports,nope");
    expect(await exited).toBe(1);
    expect(output()).toContain(`BOUNDED_WORKER_QUEUES: unknown queue "nope"; the queues are ${QUEUE_NAMES.join(", ")}`);
  }, 60_000);
});

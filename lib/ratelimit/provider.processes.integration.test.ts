import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createRedis } from "@/lib/redis/client";

// Real processes (node + tsx), each with its own Redis connection and limiter, one key prefix.
const root = path.resolve(import.meta.dirname, "../..");
const prefix = `${process.env.BOUNDED_REDIS_PREFIX ?? "bounded-test"}-procs-${randomUUID().slice(0, 8)}`;
const connection = createRedis("producer", { enableOfflineQueue: true });

afterAll(async () => {
  const keys = await connection.keys(`${prefix}:*`);
  if (keys.length) await connection.del(...keys);
  await connection.quit();
});

/** The provider as the workers see it: counts the requests it is serving at once, overall and per process. */
async function countingServer() {
  let now = 0;
  let max = 0;
  let served = 0;
  const perProcess = new Map<string, number>();
  let bothAtOnce = false;
  const server = http.createServer((req, res) => {
    const pid = String(req.headers["x-process"]);
    now++;
    served++;
    max = Math.max(max, now);
    perProcess.set(pid, (perProcess.get(pid) ?? 0) + 1);
    if ([...perProcess.values()].filter((n) => n > 0).length >= 2) bothAtOnce = true;
    req.resume();
    // Counted down when the answer is sent: before the caller reads it and gives its slot back.
    setTimeout(
      () => {
        now--;
        perProcess.set(pid, perProcess.get(pid)! - 1);
        res.end("ok");
      },
      3 + Math.random() * 12,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/call`,
    stats: () => ({ max, served, bothAtOnce }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function hammer(url: string, concurrency: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/provider-hammer.ts"], {
    cwd: root,
    env: {
      ...process.env,
      BOUNDED_REDIS_PREFIX: prefix,
      BOUNDED_PROVIDER_MODEL_CONCURRENCY: String(concurrency),
      TARGET_URL: url,
      CALLERS: "12",
      CALLS: "15",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, out, err })));
}

describe("the provider limit across worker processes", () => {
  it("two processes hammering one provider never have more than C calls in flight at the provider together", async () => {
    const C = 4;
    const server = await countingServer();
    try {
      const results = await Promise.all([hammer(server.url, C), hammer(server.url, C)]);
      for (const r of results) {
        expect(r.code, r.err).toBe(0);
        expect(JSON.parse(r.out.trim().split("\n").at(-1)!)).toEqual({ calls: 12 * 15, errors: [] });
      }
      const stats = server.stats();
      expect(stats.served).toBe(2 * 12 * 15);
      expect(stats.bothAtOnce).toBe(true);
      expect(stats.max).toBeLessThanOrEqual(C);
      expect(stats.max).toBe(C);
    } finally {
      await server.close();
    }
  }, 60_000);
});

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { logger } from "@/lib/log";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { closeRedis, redis } from "@/lib/redis/client";
import { createProviderClient } from "./card-generation-provider";

/**
 * A poll whose answer starts and then stalls past the attempt's own timeout is that timeout —
 * retried, then "failed 2 times" — never "answered something unexpected", which would end the
 * render at once however much time was left.
 */
let server: Server;
let baseUrl: string;
let polls = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.method === "POST" && req.url === "/generations") {
      res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: "g1" }));
      return;
    }
    // A status answer whose body never finishes: headers, half a JSON object, then nothing.
    polls++;
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"status":"rend');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await closeRedis();
});

beforeEach(async () => {
  polls = 0;
  await redis().del(breakerKey("images"));
});

describe("image provider client", () => {
  it("a status answer cut off by the attempt's timeout is retried as a timeout, not refused as unexpected", async () => {
    // 150 s per poll attempt at 1/100: 1.5 s of real time each, ample for the submit on a busy machine.
    const client = createProviderClient({ baseUrl, timeScale: 0.01, log: logger("test") });
    const error = await client.render("a card", new AbortController().signal).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^the image provider's poll failed 2 times \(last: .*timed out/);
    // The poll itself was cut off (not only the submit).
    expect(polls).toBeGreaterThanOrEqual(1);
  });
});

import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { pollingWatcher, streamWatcher } from "./watchers";

/** A real HTTP server on a free port, closed after each test. */
const servers: http.Server[] = [];
async function serve(handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe("the bench's polling watcher", () => {
  it("reads each answer whole over one connection: a chunked body, a sized one, 304s; sends the ETag it was given", async () => {
    const seen: { etag: string | undefined; socket: number }[] = [];
    const sockets = new Map<unknown, number>();
    const port = await serve((req, res) => {
      if (!sockets.has(req.socket)) sockets.set(req.socket, sockets.size);
      seen.push({ etag: req.headers["if-none-match"], socket: sockets.get(req.socket)! });
      const n = seen.length;
      if (n === 1) {
        // Chunked, in two writes, the second a moment later.
        res.writeHead(200, { ETag: '"a"' });
        res.write('{"part":1,');
        setTimeout(() => res.end('"rest":"\\r\\n0\\r\\n"}'), 20);
      } else if (n === 2) res.writeHead(200, { etag: '"b"', "content-length": "2" }).end("{}");
      else res.writeHead(304, { ETag: '"b"' }).end();
    });
    const answers: number[] = [];
    await pollingWatcher({
      port,
      address: "10.0.0.1",
      everyMs: 1,
      pathOf: () => "/p",
      stopped: () => answers.length >= 4,
      onAnswer: (status) => answers.push(status),
    });
    expect(answers).toEqual([200, 200, 304, 304]);
    expect(seen.map((s) => s.etag)).toEqual([undefined, '"a"', '"b"', '"b"']);
    expect(new Set(seen.map((s) => s.socket)).size).toBe(1);
  });

  it("answers 0 for a connection the server drops, and goes on over a new one; a new path forgets the ETag", async () => {
    let requests = 0;
    const paths: string[] = [];
    const port = await serve((req, res) => {
      requests++;
      paths.push(`${req.url} ${req.headers["if-none-match"] ?? "-"}`);
      if (requests === 2) return req.socket.destroy();
      if (requests === 3) return res.writeHead(200, { ETag: '"c"', Connection: "close" }).end("x");
      res.writeHead(200, { ETag: '"c"' }).end("x");
    });
    const answers: number[] = [];
    await pollingWatcher({
      port,
      address: "10.0.0.2",
      everyMs: 1,
      pathOf: () => (answers.length < 4 ? "/one" : "/two"),
      stopped: () => answers.length >= 5,
      onAnswer: (status) => answers.push(status),
    });
    expect(answers).toEqual([200, 0, 200, 200, 200]);
    expect(paths).toEqual(["/one -", '/one "c"', '/one "c"', '/one "c"', "/two -"]);
  });
});

describe("the bench's stream watcher", () => {
  it("reports each change after the first answer, until the ended one, however the bytes are split", {
    timeout: 5_000,
  }, async () => {
    const event = (version: number, updatedAt: string, terminal = false) =>
      `id: ${version}\nevent: progress\ndata: {"terminal":${terminal},"updatedAt":"${updatedAt}"}\n\n`;
    const port = await serve((req, res) => {
      expect(req.headers["x-forwarded-for"]).toBe("10.0.0.3");
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      const text =
        "retry: 3000\n\n" +
        event(1, "2026-01-01T00:00:00.000Z") +
        event(2, "2026-01-01T00:00:01.000Z") +
        ": keep-alive\n\n" +
        event(3, "2026-01-01T00:00:02.500Z") +
        event(4, "2026-01-01T00:00:03.000Z", true);
      // Cut at every 7 bytes, each piece a write of its own, a moment apart.
      const pieces = text.match(/[\s\S]{1,7}/g)!;
      let i = 0;
      const next = () => {
        if (i === pieces.length) return res.end();
        res.write(pieces[i++]);
        setTimeout(next, 1);
      };
      next();
    });
    const changes: number[] = [];
    const done = new Promise<void>((resolve) => {
      const w = streamWatcher({
        port,
        pathname: "/events",
        address: "10.0.0.3",
        onChange: (updatedAt) => {
          changes.push(updatedAt);
          if (changes.length < 2) return;
          // The ended event follows: it must not be reported.
          setTimeout(() => {
            w.close();
            resolve();
          }, 100);
        },
      });
    });
    await done;
    expect(changes).toEqual([Date.parse("2026-01-01T00:00:01.000Z"), Date.parse("2026-01-01T00:00:02.500Z")]);
  });

  it("opens on a refusal too, and reports nothing from it", async () => {
    const port = await serve((_req, res) => res.writeHead(429, { "Content-Type": "application/json" }).end("{}"));
    const changes: number[] = [];
    const w = streamWatcher({ port, pathname: "/events", address: "10.0.0.4", onChange: (u) => changes.push(u) });
    await w.opened;
    w.close();
    expect(changes).toEqual([]);
  });
});

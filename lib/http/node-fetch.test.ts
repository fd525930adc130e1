import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import { nodeFetch } from "./node-fetch";

let server: http.Server;
let base: string;
const seen: { method?: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    seen.push({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
    if (req.url === "/empty") return void res.writeHead(204).end();
    if (req.url === "/silent") return; // never answers
    if (req.url === "/events") {
      // Two events with a pause between them: the second is not sent until the first was read.
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: one\n\n");
      setTimeout(() => res.end("data: two\n\n"), 50);
      return;
    }
    res.writeHead(429, { "content-type": "application/json", "retry-after": "3", "x-request-id": "req_1" });
    res.end(JSON.stringify({ error: { message: "slow down" } }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("nodeFetch", () => {
  it("sends the method, headers and body, and answers status, every header and the body", async () => {
    const response = await nodeFetch(`${base}/json`, {
      method: "POST",
      headers: new Headers({ "content-type": "application/json", authorization: "Bearer k" }),
      body: '{"a":1}',
    });
    expect(seen.at(-1)).toMatchObject({
      method: "POST",
      body: '{"a":1}',
      headers: { authorization: "Bearer k", "content-length": "7" },
    });
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("3");
    expect(response.headers.get("x-request-id")).toBe("req_1");
    expect(await response.json()).toEqual({ error: { message: "slow down" } });
  });

  it("streams the body as it arrives", async () => {
    const response = await nodeFetch(`${base}/events`);
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: one\n\n");
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toBe("data: two\n\n");
  });

  it("answers a bodiless status without a body", async () => {
    const response = await nodeFetch(`${base}/empty`);
    expect(response.status).toBe(204);
    expect(response.body).toBeNull();
  });

  it("rejects when its signal aborts, and before sending when it already has", async () => {
    const controller = new AbortController();
    const before = seen.length;
    const pending = nodeFetch(`${base}/silent`, { signal: controller.signal });
    // Aborted once the request is out (the server has it), not before it was sent.
    await waitFor(() => seen.length > before, { what: "the server to receive the request", timeoutMs: 5_000 });
    controller.abort(new Error("deadline"));
    await expect(pending).rejects.toThrow();
    const sent = seen.length;
    await expect(nodeFetch(`${base}/json`, { signal: AbortSignal.abort(new Error("already")) })).rejects.toThrow(
      "already",
    );
    expect(seen.length).toBe(sent);
  });
});

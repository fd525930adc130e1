import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import { parseHttpDate, retryAfterMs } from "@/lib/ratelimit/retry-after";
import {
  attemptRequest,
  backoffMs,
  classifyStatus,
  describeFailure,
  sendRequest,
  type OutboundFailure,
} from "./outbound";

/** A control signal of the kind jobs abort with; callers recognise it by identity and class. */
class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

const headers = (h: Record<string, string>) => ({ header: (name: string) => h[name] });

describe("retryAfterMs", () => {
  it("reads retry-after-ms, then retry-after in seconds or as a date", () => {
    expect(retryAfterMs(headers({ "retry-after-ms": "250" }))).toBe(250);
    expect(retryAfterMs(headers({ "retry-after": "2" }))).toBe(2_000);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfterMs(headers({ "retry-after": inTenSeconds }))).toBeGreaterThan(8_000);
    expect(retryAfterMs(headers({ "retry-after": "soon" }))).toBeUndefined();
    expect(retryAfterMs(headers({}))).toBeUndefined();
  });

  const now = Date.UTC(1994, 10, 6, 8, 49, 0); // Sun, 06 Nov 1994 08:49:00 GMT

  it("reads every HTTP-date form of RFC 9110 as UTC: IMF-fixdate, RFC 850 and asctime", () => {
    expect(retryAfterMs(headers({ "retry-after": "Sun, 06 Nov 1994 08:49:37 GMT" }), now)).toBe(37_000);
    expect(retryAfterMs(headers({ "retry-after": "Sunday, 06-Nov-94 08:49:37 GMT" }), now)).toBe(37_000);
    expect(retryAfterMs(headers({ "retry-after": "Sun Nov  6 08:49:37 1994" }), now)).toBe(37_000);
  });

  it("a date already past asks for no wait, never a negative one", () => {
    expect(retryAfterMs(headers({ "retry-after": "Sun, 06 Nov 1994 08:48:00 GMT" }), now)).toBe(0);
  });

  it("reads delay-seconds as given (fractions too), never scaled by our time scale", () => {
    expect(retryAfterMs(headers({ "retry-after": "120" }))).toBe(120_000);
    expect(retryAfterMs(headers({ "retry-after": " 0.5 " }))).toBe(500);
    expect(retryAfterMs(headers({ "retry-after": "0" }))).toBe(0);
  });

  it("prefers the precise retry-after-ms, and falls back to Retry-After when it is unreadable", () => {
    expect(retryAfterMs(headers({ "retry-after-ms": "60", "retry-after": "1" }))).toBe(60);
    expect(retryAfterMs(headers({ "retry-after-ms": "later", "retry-after": "1" }))).toBe(1_000);
  });

  it("anything that is neither delay-seconds nor an HTTP-date asks for nothing", () => {
    for (const value of [
      "-1",
      "1e3",
      "0x10",
      "",
      "Sun, 06 Nov 1994",
      "2024-03-01T00:00:00Z",
      "Sun, 06 Foo 1994 08:49:37 GMT",
    ]) {
      expect(retryAfterMs(headers({ "retry-after": value }), now), value).toBeUndefined();
    }
  });

  it("reads a two-digit RFC 850 year as the most recent past year with those digits when it is more than 50 years ahead", () => {
    const in2030 = Date.UTC(2030, 0, 1);
    expect(new Date(parseHttpDate("Thursday, 01-Jan-99 00:00:00 GMT", in2030)!).getUTCFullYear()).toBe(1999);
    expect(new Date(parseHttpDate("Saturday, 01-Jan-50 00:00:00 GMT", in2030)!).getUTCFullYear()).toBe(2050);
  });
});

describe("classifyStatus", () => {
  it("429 is throttled; 5xx and 408 are server errors worth another try; other non-2xx are refusals", () => {
    expect([200, 204].map(classifyStatus)).toEqual(["ok", "ok"]);
    expect(classifyStatus(429)).toBe("throttled");
    expect([500, 502, 503, 408].map(classifyStatus)).toEqual([
      "server_error",
      "server_error",
      "server_error",
      "server_error",
    ]);
    expect([400, 401, 404, 422, 304, 101].map(classifyStatus)).toEqual([
      "rejected",
      "rejected",
      "rejected",
      "rejected",
      "rejected",
      "rejected",
    ]);
  });
});

describe("backoffMs", () => {
  it("doubles per retry from the base, jittered between 1× and 2× (whole ms), and follows the time scale", () => {
    for (let i = 0; i < 50; i++) {
      const first = backoffMs(500, 1, 1);
      const second = backoffMs(500, 2, 1);
      expect(first).toBeGreaterThanOrEqual(500);
      expect(first).toBeLessThanOrEqual(1_000);
      expect(second).toBeGreaterThanOrEqual(1_000);
      expect(second).toBeLessThanOrEqual(2_000);
      const scaledDown = backoffMs(500, 1, 0.01);
      expect(scaledDown).toBeGreaterThanOrEqual(5);
      expect(scaledDown).toBeLessThanOrEqual(10);
    }
  });
});

/** A local service answering from `handlers` by path; `/silent` never answers. */
let base: string;
let server: http.Server;
const requests: { method?: string; path?: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests.push({
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      const status = Number(/^\/status\/(\d+)/.exec(req.url ?? "")?.[1]);
      if (req.url === "/silent") return; // never answers
      if (req.url === "/cut") {
        res.writeHead(200, { "content-length": "100" });
        res.write("partial");
        setTimeout(() => res.destroy(), 5); // the server's own behaviour: a body cut off after a moment
        return;
      }
      if (status) {
        res.writeHead(
          status,
          status === 429 ? { "retry-after-ms": "1500", "retry-after": "2" } : { "content-type": "application/json" },
        );
        res.end(
          status === 503
            ? "<html>bad gateway</html>"
            : JSON.stringify({ error: { message: `refused with ${status}` } }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "x-twice": ["a", "b"] });
      res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** A port nobody listens on: bound, then closed. */
async function closedPort(): Promise<string> {
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return `http://127.0.0.1:${port}`;
}

describe("sendRequest", () => {
  it("sends the method, headers and body with its length, and reads status, headers and the whole body", async () => {
    const response = await sendRequest({
      url: new URL(`${base}/echo`),
      headers: { "content-type": "text/plain", accept: "application/json" },
      body: "héllo",
    });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ ok: true });
    expect(response.header("Content-Type")).toBe("application/json");
    expect(requests.at(-1)).toMatchObject({
      method: "POST",
      path: "/echo",
      body: "héllo",
      headers: { "content-length": "6", "content-type": "text/plain" },
    });
  });

  it("resolves every status: classifying is the caller's choice, not a rejection", async () => {
    await expect(sendRequest({ url: new URL(`${base}/status/500`) })).resolves.toMatchObject({ status: 500 });
    expect(requests.at(-1)?.method).toBe("GET");
  });

  it("an abort mid-request rejects with the signal's reason itself, never wrapped", async () => {
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    const before = requests.length;
    const sent = sendRequest({ url: new URL(`${base}/silent`), signal: controller.signal });
    await waitFor(() => requests.length > before, { timeoutMs: 5_000, what: "the server to receive the request" });
    controller.abort(reason);
    await expect(sent).rejects.toBe(reason);
  });

  it("an already aborted signal sends nothing and rejects with its reason", async () => {
    const reason = new DeadlineProbe("already");
    const before = requests.length;
    await expect(
      sendRequest({ url: new URL(`${base}/echo`), body: "x", signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    // A clock on purpose: an absence has no state to wait for; a request sent would be here by now.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(requests.length).toBe(before);
  });

  it("a body cut short is a network error, not a short answer", async () => {
    await expect(sendRequest({ url: new URL(`${base}/cut`) })).rejects.toThrow();
  });
});

describe("attemptRequest classifies what happened", () => {
  it("connection refused is unreachable and retryable, described with its code", async () => {
    const attempt = await attemptRequest({ url: new URL(`${await closedPort()}/x`) });
    expect(attempt).toMatchObject({ ok: false, kind: "unreachable", retryable: true });
    expect(describeFailure("the OCR service", attempt as OutboundFailure)).toMatch(
      /^the OCR service could not be reached \(.*ECONNREFUSED.*\)$/,
    );
  });

  it("5xx and 408 are server errors, retryable, in the service's own words with the status", async () => {
    const attempt = await attemptRequest({ url: new URL(`${base}/status/500`) });
    expect(attempt).toMatchObject({ ok: false, kind: "server_error", retryable: true, status: 500 });
    expect(describeFailure("the marketplace", attempt as OutboundFailure)).toBe(
      "the marketplace failed (HTTP 500: refused with 500)",
    );
    const notJson = await attemptRequest({ url: new URL(`${base}/status/503`) });
    expect(describeFailure("the marketplace", notJson as OutboundFailure)).toBe(
      "the marketplace answered HTTP 503: <html>bad gateway</html>",
    );
    expect(await attemptRequest({ url: new URL(`${base}/status/408`) })).toMatchObject({
      kind: "server_error",
      retryable: true,
    });
  });

  it("a 4xx is a refusal, not retryable, in the service's own words", async () => {
    const attempt = await attemptRequest({ url: new URL(`${base}/status/422`) });
    expect(attempt).toMatchObject({ ok: false, kind: "rejected", retryable: false, status: 422 });
    expect(describeFailure("the OCR service", attempt as OutboundFailure)).toBe("refused with 422");
  });

  it("429 is throttled and retryable, carrying the wait the service asked for", async () => {
    const attempt = await attemptRequest({ url: new URL(`${base}/status/429`) });
    expect(attempt).toMatchObject({ ok: false, kind: "throttled", retryable: true, status: 429, retryAfterMs: 1_500 });
  });

  it("the request's own time limit is a retryable timeout, not an abort", async () => {
    const attempt = await attemptRequest({
      url: new URL(`${base}/silent`),
      timeoutMs: 30,
      signal: new AbortController().signal,
    });
    expect(attempt).toMatchObject({ ok: false, kind: "timeout", retryable: true, timeoutMs: 30 });
    expect(describeFailure("the marketplace", attempt as OutboundFailure)).toBe(
      "the marketplace did not answer within 30 ms",
    );
  });

  it("the caller's abort reason passes through as the attempt's reason, even with a time limit set", async () => {
    const controller = new AbortController();
    const reason = new DeadlineProbe("deadline");
    const before = requests.length;
    const attempting = attemptRequest({ url: new URL(`${base}/silent`), timeoutMs: 10_000, signal: controller.signal });
    await waitFor(() => requests.length > before, { timeoutMs: 5_000, what: "the server to receive the request" });
    controller.abort(reason);
    const attempt = await attempting;
    expect(attempt).toMatchObject({ ok: false, kind: "aborted", retryable: false });
    expect(attempt.ok === false && attempt.kind === "aborted" && attempt.reason).toBe(reason);
  });

  it("hands the combined signal to an injected transport, so it needs to know nothing of the time limit", async () => {
    const attempt = await attemptRequest(
      { url: new URL("http://transport.invalid/"), timeoutMs: 20 },
      ({ signal }) =>
        new Promise((_resolve, reject) =>
          signal!.addEventListener("abort", () => reject(new Error("socket destroyed"))),
        ),
    );
    expect(attempt).toMatchObject({ kind: "timeout", timeoutMs: 20 });
  });

  it("a 2xx is ok, with the whole response", async () => {
    const attempt = await attemptRequest({ url: new URL(`${base}/echo`) });
    expect(attempt.ok && JSON.parse(attempt.response.body)).toEqual({ ok: true });
  });
});

import { describe, expect, it } from "vitest";
import { outageCause, serviceVerdict } from "./breaker";

const coded = (code: string) => Object.assign(new Error(`x ${code}`), { code });

describe("serviceVerdict: what a call's outcome says about the service", () => {
  it("no answer, 5xx, 408 and timeouts: down", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"]) expect(serviceVerdict(coded(code))).toBe("down");
    expect(serviceVerdict(new TypeError("fetch failed", { cause: coded("ECONNREFUSED") }))).toBe("down");
    expect(serviceVerdict(new AggregateError([coded("ECONNREFUSED")]))).toBe("down");
    expect(serviceVerdict(Object.assign(new Error("Connection error."), { name: "APIConnectionError" }))).toBe("down");
    expect(serviceVerdict({ ok: false, status: 503 })).toBe("down");
    expect(serviceVerdict({ ok: false, status: 408 })).toBe("down");
    expect(serviceVerdict({ ok: false, kind: "timeout" })).toBe("down");
    expect(serviceVerdict({ ok: false, message: "network error", cause: coded("ECONNRESET") })).toBe("down");
  });

  it("an answer about the request (4xx, 429, a refusal): up", () => {
    expect(serviceVerdict({ ok: false, status: 400 })).toBe("up");
    expect(serviceVerdict({ ok: false, status: 429 })).toBe("up");
    expect(serviceVerdict({ ok: false, kind: "rejected", status: 404 })).toBe("up");
    expect(serviceVerdict(Object.assign(new Error("Bad request"), { status: 400 }))).toBe("up");
  });

  it("anything else says nothing", () => {
    expect(serviceVerdict(new Error("a bug of ours"))).toBe("unknown");
    expect(serviceVerdict(undefined)).toBe("unknown");
    expect(serviceVerdict("text")).toBe("unknown");
  });
});

describe("outageCause", () => {
  it("names the failure in a few words", () => {
    expect(outageCause("Error: connect ECONNREFUSED 127.0.0.1:4010 (ECONNREFUSED)")).toBe("connection refused");
    expect(outageCause("Error: socket hang up (ECONNRESET)")).toBe("connection reset");
    expect(outageCause("Error: getaddrinfo ENOTFOUND api.example.com")).toBe("its address could not be resolved (DNS)");
    expect(outageCause("HTTP 503: overloaded")).toBe("HTTP 503");
    expect(outageCause(null)).toBe("no answer");
  });
});

import { describe, expect, it } from "vitest";
import { APIError } from "openai";
import { misconfigurationText, outageCause, serviceVerdict } from "./breaker";

const coded = (code: string) => Object.assign(new Error(`x ${code}`), { code });

describe("serviceVerdict: what a call's outcome says about the service", () => {
  it("no answer, 5xx, 408 and timeouts: down", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"])
      expect(serviceVerdict(coded(code))).toBe("down");
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

/** An error exactly as the official OpenAI client throws it for an answer with this status and body. */
const openaiError = (status: number, error: { message: string; type?: string; code?: string | null }) =>
  APIError.generate(status, { error }, undefined, new Headers({ "content-type": "application/json" }));
/** An outbound attempt (lib/http/outbound.ts) refused with this status and body. */
const refused = (status: number, body: unknown) => ({
  ok: false,
  kind: "rejected",
  status,
  response: { status, body: JSON.stringify(body), header: () => undefined },
});

describe("serviceVerdict: a misconfiguration is the service's outage, an item's own input stays the item's", () => {
  it("401 and 403 are misconfigured for every service (a wrong or revoked key)", () => {
    const wrongKey = openaiError(401, {
      message: "Incorrect API key provided: sk-abc***xyz.",
      type: "invalid_request_error",
      code: "invalid_api_key",
    });
    expect(serviceVerdict(wrongKey, "model")).toBe("misconfigured");
    expect(
      serviceVerdict(
        { ok: false, status: 401, message: "HTTP 401: Incorrect API key provided", cause: wrongKey },
        "model",
      ),
    ).toBe("misconfigured");
    for (const service of ["model", "ocr", "marketplace", "images"] as const) {
      expect(serviceVerdict(refused(401, { error: { message: "unauthorised" } }), service)).toBe("misconfigured");
      expect(serviceVerdict(refused(403, { error: { message: "forbidden" } }), service)).toBe("misconfigured");
    }
  });

  it("a 404 on the model's or OCR's one API path is misconfigured; the marketplace's and images' 404 is that request's own answer", () => {
    expect(serviceVerdict(openaiError(404, { message: "Not found" }), "model")).toBe("misconfigured");
    expect(serviceVerdict(refused(404, "Cannot POST /wrong/chat/completions"), "ocr")).toBe("misconfigured");
    expect(serviceVerdict(refused(404, { error: { message: "no such shop" } }), "marketplace")).toBe("up");
    expect(serviceVerdict(refused(404, { error: { message: "unknown generation" } }), "images")).toBe("up");
  });

  it("an unknown model is misconfigured, whatever the status it comes with", () => {
    const unknownModel = openaiError(404, {
      message: "The model `gpt-9` does not exist or you do not have access to it.",
      type: "invalid_request_error",
      code: "model_not_found",
    });
    expect(serviceVerdict(unknownModel, "model")).toBe("misconfigured");
    expect(serviceVerdict(openaiError(400, { message: "The model `gpt-9` does not exist", code: null }), "model")).toBe(
      "misconfigured",
    );
    expect(serviceVerdict(openaiError(400, { message: "invalid model ID", code: null }), "model")).toBe(
      "misconfigured",
    );
  });

  it("a 400 about the item's own input (context length exceeded, content refused) stays the item's", () => {
    const tooLong = openaiError(400, {
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
      type: "invalid_request_error",
      code: "context_length_exceeded",
    });
    expect(serviceVerdict(tooLong, "model")).toBe("up");
    expect(
      serviceVerdict({ ok: false, status: 400, message: `HTTP 400: ${tooLong.message}`, cause: tooLong }, "model"),
    ).toBe("up");
    expect(
      serviceVerdict(
        openaiError(400, {
          message: "Your request was rejected as a result of our safety system.",
          code: "content_filter",
        }),
        "model",
      ),
    ).toBe("up");
    expect(serviceVerdict(openaiError(422, { message: "messages: must not be empty" }), "model")).toBe("up");
  });

  it("the reason names the provider's words, the URL and the model asked for, and never the key", () => {
    const text = misconfigurationText(
      {
        ok: false,
        status: 401,
        message:
          "HTTP 401: Incorrect API key provided: sk-live-abcdef123456. You can find your API key at https://platform.openai.com/account/api-keys.",
      },
      "POST http://127.0.0.1:4010/v1/chat/completions, model gpt-4o-mini",
      "sk-live-abcdef123456",
    );
    expect(text).toMatch(/^misconfigured: HTTP 401: Incorrect API key provided/);
    expect(text).toContain("POST http://127.0.0.1:4010/v1/chat/completions, model gpt-4o-mini");
    expect(text).not.toContain("abcdef123456");
    // The key goes, its sentence's full stop stays.
    expect(text).toContain("Incorrect API key provided: [key]. You can find your API key");
    expect(
      misconfigurationText(
        { ok: false, status: 401, message: "HTTP 401: Incorrect API key provided: sk-ab***yz. You can find it." },
        undefined,
        undefined,
      ),
    ).toBe("misconfigured: HTTP 401: Incorrect API key provided: [key]. You can find it.");
    expect(
      misconfigurationText(
        refused(404, { error: { message: "Unknown path /v2/chat/completions" } }),
        "POST http://x/v2/chat/completions",
        undefined,
      ),
    ).toBe("misconfigured: HTTP 404: Unknown path /v2/chat/completions (POST http://x/v2/chat/completions)");
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

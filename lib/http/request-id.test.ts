import { NextRequest } from "next/server";
import { describe, expect, it } from "vitest";
import { proxy } from "@/proxy";
import { REQUEST_ID_HEADER, requestIdOf } from "./request-id";

describe("request id", () => {
  it("keeps a well-formed incoming id and replaces a malformed or missing one", () => {
    expect(requestIdOf(new Headers({ "x-request-id": "lb-0f3c9a7e.42" }))).toBe("lb-0f3c9a7e.42");
    for (const bad of ["short", "has spaces in it", "x".repeat(129), 'quote"inside-id']) {
      expect(requestIdOf(new Headers({ "x-request-id": bad }))).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(requestIdOf(new Headers())).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("is given to pages too: the proxy passes it on to the page and answers with it", () => {
    const kept = proxy(new NextRequest("http://localhost/jobs", { headers: { "x-request-id": "lb-0f3c9a7e.42" } }));
    expect(kept.headers.get(REQUEST_ID_HEADER)).toBe("lb-0f3c9a7e.42");
    // NextResponse.next carries the rewritten request headers as x-middleware-request-* headers.
    expect(kept.headers.get(`x-middleware-request-${REQUEST_ID_HEADER}`)).toBe("lb-0f3c9a7e.42");
    const minted = proxy(new NextRequest("http://localhost/jobs"));
    expect(minted.headers.get(REQUEST_ID_HEADER)).toMatch(/^[0-9a-f-]{36}$/);
  });
});

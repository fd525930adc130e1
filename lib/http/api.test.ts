import { describe, expect, it } from "vitest";
import { z } from "zod";
import { toErrorResponse } from "./api";

describe("toErrorResponse", () => {
  it("answers a bad field with 422 and a message that names the field and the problem", async () => {
    const schema = z.object({ budgetSoftS: z.number(), parts: z.number().max(50, "At most 50 parts") }).strict();
    const parsed = schema.safeParse({ budgetSoftS: "lots", parts: 99, force: true });
    const response = toErrorResponse(parsed.error, "test");
    expect(response.status).toBe(422);
    const body = await response.json();
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.message).toBe(
      'The request has invalid fields — budgetSoftS: Invalid input: expected number, received string; parts: At most 50 parts; Unrecognized key: "force".',
    );
    expect(body.error.issues).toHaveLength(3);
  });

  it("shows the first three problems and counts the rest", async () => {
    const parsed = z.object({ a: z.string(), b: z.string(), c: z.string(), d: z.string() }).safeParse({});
    const body = await toErrorResponse(parsed.error, "test").json();
    expect(body.error.message).toMatch(/^The request has invalid fields — a: .*; b: .*; c: .* \(and 1 more\)\.$/);
  });

  it("never shows an unexpected error's text", async () => {
    const response = toErrorResponse(new Error("connection to 10.0.0.5 failed for user postgres"), "test");
    expect(response.status).toBe(500);
    expect(JSON.stringify(await response.json())).not.toContain("10.0.0.5");
  });
});

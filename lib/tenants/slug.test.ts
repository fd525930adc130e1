import { describe, expect, it } from "vitest";
import { tenantSlugSchema } from "./slug";

const problems = (value: unknown) => tenantSlugSchema.safeParse(value).error?.issues.map((i) => i.message);

describe("tenantSlugSchema", () => {
  it("says a missing or empty tenant is required, and only that", () => {
    expect(problems("")).toEqual(["tenant is required"]);
    expect(problems("   ")).toEqual(["tenant is required"]);
    expect(problems(undefined)).toEqual(["tenant is required"]);
  });

  it("says what a tenant name may contain when it is malformed", () => {
    expect(problems("../../etc")).toEqual(["tenant must be 2–63 lower-case letters, digits or '-'"]);
    expect(problems("system")).toEqual(["tenant “system” is reserved"]);
    expect(tenantSlugSchema.parse(" Acme-1 ")).toBe("acme-1");
  });
});

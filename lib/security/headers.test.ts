import path from "node:path";
import { pathToFileURL } from "node:url";
import type { NextConfig } from "next";
import { describe, expect, it } from "vitest";
import { SECURITY_HEADERS } from "./headers";

describe("SECURITY_HEADERS", () => {
  it("are the headers next.config.js gives every path, neither more nor fewer", async () => {
    const file = pathToFileURL(path.resolve(import.meta.dirname, "../../next.config.js")).href;
    const { default: config } = (await import(file)) as { default: NextConfig };
    const everyPath = (await config.headers!()).find((rule) => rule.source === "/:path*");
    expect(Object.fromEntries(everyPath!.headers.map((h) => [h.key, h.value]))).toEqual(SECURITY_HEADERS);
  });
});

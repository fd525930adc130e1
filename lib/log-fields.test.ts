import { describe, expect, it, vi } from "vitest";

/** Fields put in scope around a job's work reach every logger's lines, once. Lines captured at the pino destination. */
vi.hoisted(() => {
  process.env.LOG_LEVEL = "info";
});
const logged = vi.hoisted(() => [] as string[]);
vi.mock("pino", async (importOriginal) => {
  const real = (await importOriginal<typeof import("pino")>()).default;
  const { Writable } = await import("node:stream");
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logged.push(String(chunk));
      done();
    },
  });
  return { default: Object.assign((options: import("pino").LoggerOptions) => real(options, sink), real) };
});

const { logger, withLogFields } = await import("./log");

describe("withLogFields", () => {
  it("adds the fields to lines of any logger inside the scope, across awaits, and to none outside it", async () => {
    const elsewhere = logger("ratelimit");
    await withLogFields({ tenantId: "tenant-1", traceId: "abc" }, async () => {
      elsewhere.info("before");
      await new Promise((r) => setTimeout(r, 1));
      elsewhere.warn({ waitMs: 5 }, "after");
    });
    elsewhere.info("outside");
    const lines = logged.splice(0).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.msg, l.tenantId, l.traceId])).toEqual([
      ["before", "tenant-1", "abc"],
      ["after", "tenant-1", "abc"],
      ["outside", undefined, undefined],
    ]);
  });

  it("writes a field once when the logger bound it itself", () => {
    const jobLog = logger("workers").child({ jobId: "j", tenantId: "tenant-1" });
    withLogFields({ tenantId: "tenant-1" }, () => jobLog.info("run started"));
    const [line] = logged.splice(0);
    expect(line!.match(/"tenantId"/g)).toHaveLength(1);
  });
});

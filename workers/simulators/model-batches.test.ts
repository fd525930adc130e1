import { describe, expect, it } from "vitest";
import { BATCH_TURNAROUND, parseBatchFile, sampleBatchTurnaroundMs } from "./model-batches";
import { HttpError } from "./router";

/** A small seeded generator (mulberry32), so the distribution checks are reproducible. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("a batch's turnaround", () => {
  const random = seeded(20261204);
  const samples = Array.from({ length: 20_000 }, () => sampleBatchTurnaroundMs(random)).sort((a, b) => a - b);
  const share = (test: (ms: number) => boolean) => samples.filter(test).length / samples.length;

  it("has a median of about 7 production minutes", () => {
    const median = samples[samples.length / 2]!;
    expect(median).toBeGreaterThan(6 * 60_000);
    expect(median).toBeLessThan(8 * 60_000);
  });

  it("is within an hour for 90 % of batches", () => {
    expect(share((ms) => ms <= 3_600_000)).toBeGreaterThan(0.88);
    expect(share((ms) => ms <= 3_600_000)).toBeLessThan(0.92);
  });

  it("runs past the 24 h window for about 3 % of batches, and only for those drawn to expire", () => {
    const expiring = share((ms) => ms > BATCH_TURNAROUND.windowMs);
    expect(expiring).toBeGreaterThan(0.025);
    expect(expiring).toBeLessThan(0.035);
    // Nothing lands just under the window by accident of the body's tail: the body stays below 98 % of it.
    expect(share((ms) => ms > BATCH_TURNAROUND.windowMs * 0.98 && ms <= BATCH_TURNAROUND.windowMs)).toBe(0);
  });

  it("of a batch that expires, runs well past the window even for the smallest draw, so requests are left to expire", () => {
    // Drawn to expire (0 < 3 %), then the smallest turnaround there is: its finalizing phase
    // (the last 5 % or minute) would otherwise begin before the window closes, every request done.
    expect(sampleBatchTurnaroundMs(() => 0)).toBeGreaterThanOrEqual(BATCH_TURNAROUND.windowMs * 1.1);
  });
});

describe("a batch input file", () => {
  const ok = () => ({ ok: true as const });
  const line = (customId: string, body: unknown = { model: "m", messages: [{ role: "user", content: "hi" }] }) =>
    JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body });
  const refusal = (content: string) => {
    try {
      parseBatchFile(content, ok);
    } catch (err) {
      expect(err).toBeInstanceOf(HttpError);
      expect((err as HttpError).status).toBe(400);
      return err as HttpError;
    }
    throw new Error("the file was accepted");
  };

  it("is read line by line, a trailing newline allowed", () => {
    const lines = parseBatchFile(`${line("a")}\n${line("b")}\n`, ok);
    expect(lines.map((l) => l.customId)).toEqual(["a", "b"]);
    expect(lines[0]!.request.messages).toEqual([{ role: "user", content: "hi" }]);
  });

  it("is refused with the line and the reason when a line is not a request of the chat endpoint", () => {
    expect(refusal(`${line("a")}\nnot json`).message).toBe("line 2: not a JSON object");
    expect(refusal(line("a").replace("/v1/chat/completions", "/v1/embeddings")).message).toMatch(/^line 1: url: /);
    expect(
      refusal(JSON.stringify({ custom_id: "a", method: "GET", url: "/v1/chat/completions", body: {} })).message,
    ).toMatch(/^line 1: method: /);
    expect(refusal(line("a", { model: "m", messages: [] })).message).toMatch(/^line 1: body\.messages: /);
    expect(refusal(line("a", { model: "m", stream: true, messages: [{ role: "user", content: "x" }] })).message).toBe(
      "line 1: body.stream: a batch request is not streamed",
    );
    expect(refusal(`${line("a")}\n${line("a")}`).message).toBe("line 2: custom_id 'a' is not unique in the file");
    expect(refusal("\n").message).toBe("line 1: the file has no requests");
  });
});

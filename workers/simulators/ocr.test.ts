import { describe, expect, it } from "vitest";
import {
  encryptedPdf,
  sampleJpeg,
  samplePdf,
  samplePng,
  sampleText,
  sampleTiff,
  truncatedPdf,
} from "@/lib/documents/sample-documents";
import { OCR_LATENCY, readDocument, sampleOcrLatencyMs } from "./ocr";

/** A seeded generator (mulberry32): the same sample on every run. */
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

describe("OCR latency matches production: median ~2 s, p99 ~15 s, a long tail", () => {
  it("over 200,000 seeded samples", () => {
    const random = seeded(7);
    const sample = Array.from({ length: 200_000 }, () => sampleOcrLatencyMs(random)).sort((a, b) => a - b);
    const q = (p: number) => sample[Math.ceil(p * sample.length) - 1]!;
    expect(q(0.5)).toBeGreaterThan(1_900);
    expect(q(0.5)).toBeLessThan(2_100);
    expect(q(0.99)).toBeGreaterThan(14_000);
    expect(q(0.99)).toBeLessThan(16_000);
    expect(sample.at(-1)!).toBeGreaterThan(30_000);
    expect(sample.at(-1)!).toBeLessThanOrEqual(OCR_LATENCY.maxMs);
  });
});

describe("readDocument: what the simulated OCR service makes of a document", () => {
  it("returns plain text as it is, with a page per 60 lines", () => {
    expect(readDocument(sampleText("hello\nworld"))).toEqual({ ok: true, text: "hello\nworld", pages: 1 });
    expect(readDocument(sampleText("x\n".repeat(130)))).toMatchObject({ ok: true, pages: 3 });
  });

  it("extracts the text a PDF draws and counts its pages", () => {
    expect(readDocument(samplePdf(["Invoice (No. 7)", "Total 12.00 EUR", "Thanks"]))).toEqual({
      ok: true,
      text: "Invoice (No. 7)\nTotal 12.00 EUR\nThanks",
      pages: 3,
    });
  });

  it("makes up the same receipt for the same image, one per TIFF page", () => {
    const png = readDocument(samplePng());
    expect(png).toMatchObject({ ok: true, pages: 1 });
    expect(readDocument(samplePng())).toEqual(png);
    expect(readDocument(sampleJpeg())).toMatchObject({ ok: true, pages: 1, text: expect.stringContaining("Total:") });
    expect(readDocument(sampleTiff(3))).toMatchObject({
      ok: true,
      pages: 3,
      text: expect.stringContaining("Page 3 of 3"),
    });
  });

  it("cannot read damaged or password-protected documents", () => {
    expect(readDocument(truncatedPdf())).toEqual({
      ok: false,
      reason: "the PDF is damaged (it ends before its end-of-file marker)",
    });
    expect(readDocument(encryptedPdf())).toEqual({ ok: false, reason: "the PDF is password-protected" });
    expect(readDocument(samplePng().subarray(0, 40))).toMatchObject({ ok: false });
    expect(readDocument(sampleJpeg().subarray(0, 10))).toMatchObject({ ok: false });
    expect(readDocument(Uint8Array.from([0x49, 0x49, 0x2a, 0x00, 0xff, 0, 0, 0]))).toMatchObject({ ok: false });
  });

  it("does not take a file that is none of the supported types", () => {
    expect(readDocument(Uint8Array.from([0, 1, 2]))).toBeNull();
  });
});

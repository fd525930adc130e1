import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { sniffDocumentType } from "@/lib/documents/inspect-documents";
import { simOcrErrorRate } from "@/lib/documents/settings";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { simulatedProviderLimits, type SimulatedLimitsOverrides } from "./provider-limits";
import { HttpError, errorBody, sendJson, type Route } from "./router";
import {
  createCallerWait,
  sampleLatencyMs,
  sendServerError,
  type LatencyShape,
  type SimulatedService,
  type SimulatorOptions,
} from "./simulated-call";

const log = logger("simulators.ocr");

/**
 * Latency of one OCR call in production: median ~2 s, p99 ~15 s, rare calls up to 2 min (a
 * 40-page scan, a cold OCR worker). A lognormal body with a uniform tail of 0.1 %; σ is chosen so
 * that the mixture's p99, tail included, is 15 s (the lognormal alone needs its 99.1st percentile
 * there: z = 2.365, σ = ln(15 / 2) / 2.365 ≈ 0.852).
 */
export const OCR_LATENCY = {
  medianMs: 2_000,
  sigma: 0.852,
  tailShare: 0.001,
  tailFromMs: 30_000,
  maxMs: 120_000,
} as const satisfies LatencyShape;

/** The largest document the simulated service reads; above every upload limit Bounded allows. */
const OCR_MAX_BODY_BYTES = 32 * 1024 * 1024;

/** One call's latency in production milliseconds (not yet time-scaled). Pure given `random`. */
export function sampleOcrLatencyMs(random: () => number = Math.random): number {
  return sampleLatencyMs(OCR_LATENCY, random);
}

/** What the simulated OCR makes of a document: its text and page count, or why it cannot read it. */
export type OcrReading = { ok: true; text: string; pages: number } | { ok: false; reason: string };

/**
 * Reads a document the way the simulated service does. Plain text is returned as it is; text
 * drawn in a PDF (`(…) Tj` / `[…] TJ`) is extracted; scans and images get a deterministic
 * made-up receipt, so a demo shows something plausible. Damaged files (a PDF without its
 * end-of-file marker, an image cut short) and password-protected PDFs are unreadable — the
 * failures an upload check cannot see.
 */
export function readDocument(bytes: Uint8Array): OcrReading | null {
  const type = sniffDocumentType(bytes);
  if (!type) return null;
  switch (type) {
    case "text/plain": {
      const text = new TextDecoder().decode(bytes);
      return { ok: true, text, pages: Math.max(1, Math.ceil(text.split(/\r?\n/).length / 60)) };
    }
    case "application/pdf":
      return readPdf(bytes);
    case "image/png": {
      const text = latin1(bytes);
      if (!text.includes("IEND", Math.max(0, bytes.length - 64)))
        return { ok: false, reason: "the PNG image is cut short (no end chunk)" };
      return { ok: true, text: madeUpText(bytes, 1), pages: 1 };
    }
    case "image/jpeg": {
      let end = bytes.length;
      while (end > 2 && bytes[end - 1] === 0) end--;
      if (!(bytes[end - 2] === 0xff && bytes[end - 1] === 0xd9))
        return { ok: false, reason: "the JPEG image is cut short (no end marker)" };
      return { ok: true, text: madeUpText(bytes, 1), pages: 1 };
    }
    case "image/tiff": {
      const pages = tiffPages(bytes);
      if (pages === null)
        return { ok: false, reason: "the TIFF image is damaged (its page directory points outside the file)" };
      return { ok: true, text: madeUpText(bytes, pages), pages };
    }
  }
}

const latin1 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");

function readPdf(bytes: Uint8Array): OcrReading {
  const text = latin1(bytes);
  if (!text.slice(-1024).includes("%%EOF"))
    return { ok: false, reason: "the PDF is damaged (it ends before its end-of-file marker)" };
  if (/\/Encrypt\b/.test(text)) return { ok: false, reason: "the PDF is password-protected" };
  const pages = Math.max(1, (text.match(/\/Type\s*\/Page(?![A-Za-z])/g) ?? []).length);
  const unescapePdf = (s: string) =>
    s.replace(/\\([nrt()\\])/g, (_, c: string) => ({ n: "\n", r: "\r", t: "\t" })[c] ?? c);
  const lines: string[] = [];
  for (const m of text.matchAll(/\(((?:\\.|[^\\)])*)\)\s*Tj|\[((?:\\.|[^\]])*)\]\s*TJ/g)) {
    if (m[1] !== undefined) lines.push(unescapePdf(m[1]));
    else lines.push([...m[2]!.matchAll(/\(((?:\\.|[^\\)])*)\)/g)].map((p) => unescapePdf(p[1]!)).join(""));
  }
  const extracted = lines.join("\n").trim();
  return { ok: true, text: extracted || madeUpText(bytes, pages), pages };
}

/** Pages of a TIFF: the chain of image directories, or null when an offset leaves the file. */
function tiffPages(bytes: Uint8Array): number | null {
  if (bytes.length < 8) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const little = bytes[0] === 0x49;
  let offset = view.getUint32(4, little);
  let pages = 0;
  const seen = new Set<number>();
  while (offset !== 0) {
    if (seen.has(offset) || offset + 2 > bytes.length) return null;
    seen.add(offset);
    const entries = view.getUint16(offset, little);
    const next = offset + 2 + entries * 12;
    if (next + 4 > bytes.length) return null;
    pages++;
    offset = view.getUint32(next, little);
    if (pages > 10_000) return null;
  }
  return pages === 0 ? null : pages;
}

/** A made-up receipt per page, the same for the same bytes. */
function madeUpText(bytes: Uint8Array, pages: number): string {
  const hash = createHash("sha256").update(bytes).digest();
  const shops = ["REWE Markt", "Stadtwerke", "Deutsche Bahn", "Apotheke am Markt", "Acme GmbH"];
  return Array.from({ length: pages }, (_, p) => {
    const n = hash.readUInt32BE((p * 4) % 28);
    const shop = shops[n % shops.length]!;
    const total = ((n % 20_000) / 100).toFixed(2);
    const day = String((n % 28) + 1).padStart(2, "0");
    return [
      pages > 1 ? `Page ${p + 1} of ${pages}` : null,
      shop,
      `Receipt no. ${n % 100_000}`,
      `Date: 2026-01-${day}`,
      `Total: ${total} EUR`,
    ]
      .filter(Boolean)
      .join("\n");
  }).join("\n\n");
}

async function readBody(req: IncomingMessage, limitBytes: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw new HttpError(413, `document over ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

export interface OcrSimulatorOptions extends SimulatorOptions {
  /** Share of calls answered with a 500 (after their latency). @defaultValue `BOUNDED_SIM_OCR_ERROR_RATE`, else 0.01 */
  errorRate?: number;
  /** One call's production latency in ms, before scaling. @defaultValue `sampleOcrLatencyMs` */
  latencyMs?: () => number;
  /** Calls in flight and requests per production second before a 429. @defaultValue `BOUNDED_SIM_OCR_CONCURRENCY`, `_RPS` */
  limits?: SimulatedLimitsOverrides;
}

export type OcrSimulator = SimulatedService;

/**
 * The OCR service: `POST /ocr` with the document's bytes as the request body (any content type;
 * the service looks at the bytes) → 200 `{ text, pages }`. Errors use the simulators' JSON error
 * shape `{ error: { message, type } }`: 400 empty body, 413 over 32 MiB, 415 not a PDF, PNG,
 * JPEG, TIFF or UTF-8 text (answered at once), 422 a damaged or password-protected document,
 * 500 the configured share of calls, 429 with Retry-After beyond its limits (`GET /ocr/_stats` counts them).
 */
export function createOcrSimulator(options: OcrSimulatorOptions = {}): OcrSimulator {
  const errorRate = options.errorRate ?? simOcrErrorRate();
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const latencyMs = options.latencyMs ?? (() => sampleOcrLatencyMs(random));
  const caller = createCallerWait(timeScale, log, options.slowdown);
  const limits = simulatedProviderLimits("ocr", timeScale, options.limits);

  const ocr: Route = {
    method: "POST",
    path: "/ocr",
    handler: async ({ req, res }) => {
      if (!limits.admit(res)) return; // 429 beyond the provider's limits (./provider-limits.ts)
      const bytes = await readBody(req, OCR_MAX_BODY_BYTES);
      if (bytes.byteLength === 0) throw new HttpError(400, "the request body is empty: send the document's bytes");
      if (!sniffDocumentType(bytes))
        throw new HttpError(415, "not a PDF, PNG, JPEG, TIFF or UTF-8 text document", "unsupported_media_type");

      if (!(await caller.wait({ req, res }, latencyMs))) return;
      if (random() < errorRate) {
        sendServerError(res, "The OCR service had an error while processing the document.");
        return;
      }
      const reading = readDocument(bytes)!;
      if (!reading.ok) {
        sendJson(res, 422, errorBody(reading.reason, "unreadable_document"));
        return;
      }
      sendJson(res, 200, { text: reading.text, pages: reading.pages });
    },
  };

  return { routes: [ocr, ...limits.routes], inFlight: caller.inFlight };
}

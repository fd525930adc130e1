import { env } from "@/lib/env";

/** At most this many documents in one `bulk_ocr` job: production's largest batches are 95 files. */
const MAX_DOCUMENTS = 95;

export interface DocumentLimits {
  /** @defaultValue 95 */
  maxFiles: number;
  /** One scanned document. @defaultValue `BOUNDED_DOCUMENT_MAX_BYTES` (10 MiB: larger scans are rare and OCR services refuse them) */
  maxFileBytes: number;
  /** One batch. @defaultValue `BOUNDED_DOCUMENT_BATCH_MAX_BYTES` (50 MiB: what one request and one transaction carry comfortably) */
  maxTotalBytes: number;
}

export function documentLimits(): DocumentLimits {
  const e = env();
  return {
    maxFiles: MAX_DOCUMENTS,
    maxFileBytes: e.BOUNDED_DOCUMENT_MAX_BYTES,
    maxTotalBytes: e.BOUNDED_DOCUMENT_BATCH_MAX_BYTES,
  };
}

/**
 * Where OCR requests go: `OCR_BASE_URL`, else the bundled simulators on `BOUNDED_SIM_PORT`
 * (`http://127.0.0.1:4010` by default), which serve `POST /ocr`.
 */
export function ocrBaseUrl(): string {
  const e = env();
  return e.OCR_BASE_URL ?? `http://127.0.0.1:${e.BOUNDED_SIM_PORT}`;
}

/** `BOUNDED_SIM_OCR_ERROR_RATE`: the share of simulated OCR calls that answer 500. */
export function simOcrErrorRate(): number {
  return env().BOUNDED_SIM_OCR_ERROR_RATE;
}

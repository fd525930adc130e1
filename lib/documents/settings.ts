import { env } from "@/lib/env";

/** Settings of the document pipeline that come from the environment (lib/env.ts). */
const documentEnv = env;

/** At most this many documents in one `bulk_ocr` job: production's largest batches are 95 files. */
export const MAX_DOCUMENTS = 95;
/** One scanned document; larger scans are rare and OCR services refuse them. */
export const DEFAULT_DOCUMENT_MAX_BYTES = 10 * 1024 * 1024;
/** One batch: what one request body and one database transaction carry comfortably. */
export const DEFAULT_DOCUMENT_BATCH_MAX_BYTES = 50 * 1024 * 1024;
/** Share of simulated OCR calls that answer 500. */
export const DEFAULT_SIM_OCR_ERROR_RATE = 0.01;

export interface DocumentLimits {
  /** @defaultValue 95 */
  maxFiles: number;
  /** @defaultValue `BOUNDED_DOCUMENT_MAX_BYTES`, else 10 MiB */
  maxFileBytes: number;
  /** @defaultValue `BOUNDED_DOCUMENT_BATCH_MAX_BYTES`, else 50 MiB */
  maxTotalBytes: number;
}

export function documentLimits(): DocumentLimits {
  const e = documentEnv();
  return {
    maxFiles: MAX_DOCUMENTS,
    maxFileBytes: e.BOUNDED_DOCUMENT_MAX_BYTES ?? DEFAULT_DOCUMENT_MAX_BYTES,
    maxTotalBytes: e.BOUNDED_DOCUMENT_BATCH_MAX_BYTES ?? DEFAULT_DOCUMENT_BATCH_MAX_BYTES,
  };
}

/**
 * Where OCR requests go: `OCR_BASE_URL`, else the bundled simulators on `BOUNDED_SIM_PORT`
 * (`http://127.0.0.1:4010` by default), which serve `POST /ocr`.
 */
export function ocrBaseUrl(): string {
  const e = documentEnv();
  return e.OCR_BASE_URL ?? `http://127.0.0.1:${e.BOUNDED_SIM_PORT}`;
}

/** `BOUNDED_SIM_OCR_ERROR_RATE`, else 0.01. */
export function simOcrErrorRate(): number {
  return documentEnv().BOUNDED_SIM_OCR_ERROR_RATE ?? DEFAULT_SIM_OCR_ERROR_RATE;
}

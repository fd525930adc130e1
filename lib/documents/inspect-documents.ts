import { formatBytes } from "@/lib/units";
import type { DocumentLimits } from "./settings";

/** The document types OCR accepts, by the content type stored on each JobFile. */
const DOCUMENT_TYPES = {
  "application/pdf": "PDF",
  "image/png": "PNG",
  "image/jpeg": "JPEG",
  "image/tiff": "TIFF",
  "text/plain": "plain text",
} as const;

export type DocumentType = keyof typeof DOCUMENT_TYPES;

export const SUPPORTED_TYPES_LABEL = "PDF, PNG, JPEG, TIFF or plain text";

const startsWith = (bytes: Uint8Array, ...signature: number[]) => signature.every((b, i) => bytes[i] === b);
const ascii = (bytes: Uint8Array, at: number, text: string) =>
  [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0));

/** Formats people upload by mistake, named so the refusal says what the file is. */
function knownUnsupported(bytes: Uint8Array): string | null {
  if (startsWith(bytes, 0x50, 0x4b, 0x03, 0x04)) return "a Word or Excel document or a ZIP archive";
  if (startsWith(bytes, 0xd0, 0xcf, 0x11, 0xe0)) return "an old Office document (.doc/.xls)";
  if (ascii(bytes, 0, "GIF87a") || ascii(bytes, 0, "GIF89a")) return "a GIF image";
  if (ascii(bytes, 0, "BM")) return "a BMP image";
  if (ascii(bytes, 0, "RIFF") && ascii(bytes, 8, "WEBP")) return "a WebP image";
  if (ascii(bytes, 4, "ftypheic") || ascii(bytes, 4, "ftypheix") || ascii(bytes, 4, "ftypmif1")) return "a HEIC photo";
  if (startsWith(bytes, 0xff, 0xfe) || startsWith(bytes, 0xfe, 0xff)) return "UTF-16 text";
  return null;
}

/** Plain text: valid UTF-8 with no control characters but tab, line breaks and form feed. */
function isPlainText(bytes: Uint8Array): boolean {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return false;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters (but tab and line ends) are what marks a binary file
  return !/[\u0000-\u0008\u000b\u000e-\u001f\u007f]/.test(text);
}

/**
 * The document's type, from its first bytes (never from its name or the browser's word for it),
 * or null when it is none of the supported types.
 */
export function sniffDocumentType(bytes: Uint8Array): DocumentType | null {
  if (ascii(bytes, 0, "%PDF-")) return "application/pdf";
  if (startsWith(bytes, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (startsWith(bytes, 0xff, 0xd8, 0xff)) return "image/jpeg";
  if (startsWith(bytes, 0x49, 0x49, 0x2a, 0x00) || startsWith(bytes, 0x4d, 0x4d, 0x00, 0x2a)) return "image/tiff";
  if (knownUnsupported(bytes)) return null;
  return isPlainText(bytes) ? "text/plain" : null;
}

export type DocumentRejection =
  | "too_many_files"
  | "no_files"
  | "batch_too_large"
  | "file_too_large"
  | "empty_file"
  | "unsupported_type";

export interface DocumentProblem {
  status: 413 | 415 | 422;
  code: DocumentRejection;
  /** About the file alone ("is empty"); callers say which file. */
  reason: string;
}

/**
 * What is wrong with one document before anything reads it — empty, too large, not a supported
 * type — or null. The upload refuses such a file; the worker checks again (limits may have
 * changed, rows may come from elsewhere) and records it as that file's failure.
 */
export function documentProblem(bytes: Uint8Array, maxFileBytes: number): DocumentProblem | null {
  if (bytes.byteLength === 0) return { status: 422, code: "empty_file", reason: "is empty" };
  if (bytes.byteLength > maxFileBytes) {
    return {
      status: 413,
      code: "file_too_large",
      reason: `is ${formatBytes(bytes.byteLength)}; the limit is ${formatBytes(maxFileBytes)} per document`,
    };
  }
  const type = sniffDocumentType(bytes);
  if (!type) {
    const known = knownUnsupported(bytes);
    return {
      status: 415,
      code: "unsupported_type",
      reason: `is ${known ?? "not a supported document type"}; upload ${SUPPORTED_TYPES_LABEL}`,
    };
  }
  if (type === "text/plain" && new TextDecoder().decode(bytes).trim() === "")
    return { status: 422, code: "empty_file", reason: "contains no text" };
  return null;
}

export interface UploadedDocument {
  filename: string;
  bytes: Uint8Array;
}

export interface AcceptedDocument extends UploadedDocument {
  contentType: DocumentType;
}

export type DocumentsInspection =
  | { ok: true; files: AcceptedDocument[]; totalBytes: number }
  | { ok: false; status: 413 | 415 | 422; code: DocumentRejection; message: string };

/** “File 3 (“scan.bmp”)”: the number is the one the progress page uses for the file. */
function fileLabel(number: number, filename: string): string {
  return `File ${number} (“${filename}”)`;
}

/**
 * Everything checked before a batch is created: the number of files, the total size and each
 * file (size, emptiness, type). The first problem refuses the whole batch, naming the file.
 */
export function inspectDocuments(files: UploadedDocument[], limits: DocumentLimits): DocumentsInspection {
  if (files.length === 0)
    return {
      ok: false,
      status: 422,
      code: "no_files",
      message: "Choose at least one document to upload (form field `files`).",
    };
  if (files.length > limits.maxFiles) {
    return {
      ok: false,
      status: 413,
      code: "too_many_files",
      message: `The upload has ${files.length} documents; the limit is ${limits.maxFiles} per batch. Split it into smaller batches.`,
    };
  }
  const totalBytes = files.reduce((n, f) => n + f.bytes.byteLength, 0);
  if (totalBytes > limits.maxTotalBytes) {
    return {
      ok: false,
      status: 413,
      code: "batch_too_large",
      message: `The documents add up to ${formatBytes(totalBytes)}; the limit is ${formatBytes(limits.maxTotalBytes)} per batch. Split it into smaller batches.`,
    };
  }
  const accepted: AcceptedDocument[] = [];
  for (const [i, file] of files.entries()) {
    const problem = documentProblem(file.bytes, limits.maxFileBytes);
    if (problem)
      return {
        ok: false,
        status: problem.status,
        code: problem.code,
        message: `${fileLabel(i + 1, file.filename)} ${problem.reason}. Nothing was uploaded.`,
      };
    accepted.push({ ...file, contentType: sniffDocumentType(file.bytes)! });
  }
  return { ok: true, files: accepted, totalBytes };
}

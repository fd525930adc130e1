import { assertNoNul, MalformedInput } from "@/lib/security/well-formed";
import { formatBytes } from "@/lib/units";
import { ApiError } from "./errors";

/**
 * Reads a request body, refusing with 413 as soon as it passes `maxBytes` — whether or not the
 * client sent a Content-Length (a chunked body is counted as it arrives, never buffered whole).
 */
export async function readBodyLimited(
  request: Request,
  maxBytes: number,
  what: string,
  code = "upload_too_large",
): Promise<Uint8Array> {
  const tooLarge = (size: number) =>
    new ApiError(
      413,
      code,
      `The ${what} is ${size > maxBytes ? `over ${formatBytes(maxBytes)}` : formatBytes(size)}; the limit is ${formatBytes(maxBytes)}. Split it into smaller parts.`,
    );
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(declared);
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(size);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    body.set(c, offset);
    offset += c.byteLength;
  }
  return body;
}

/** Parses multipart form data from a body already read (and limited) by `readBodyLimited`. */
export async function parseMultipart(body: Uint8Array, contentType: string, help: string): Promise<FormData> {
  const form = await new Response(body as BodyInit, { headers: { "content-type": contentType } })
    .formData()
    .catch(() => {
      throw new ApiError(400, "bad_multipart", `The form data could not be read. ${help}`);
    });
  // Text fields are stored (a tenant, a name); a file's bytes are the file checks' business.
  for (const [name, value] of form) {
    if (typeof value === "string" && (value.includes("\0") || name.includes("\0"))) {
      throw new ApiError(
        400,
        "nul_byte",
        `The form field "${name.replaceAll("\0", "")}" contains a NUL byte, which no field accepts.`,
      );
    }
  }
  return form;
}

/** The most an operator's JSON request needs: a filter, a budget, a number of parts. */
const JSON_BODY_MAX_BYTES = 64 * 1024;

/** A JSON body as read: its value, or why it could not be read (to throw once the call is audited). */
export type JsonBody = { ok: true; value: unknown } | { ok: false; error: ApiError };

/**
 * Reads a small JSON body: an empty body is `{}`; more than 64 KiB is a 413, a body declared as
 * another type a 415, text that is not JSON (or holds a NUL byte in a string) a 400 — each showing what to send (`example`). Never throws for a bad body: an operator route
 * records the call (and refuses an anonymous caller with 401) before it answers the 4xx. The
 * caller validates the value with zod.
 */
export async function readJsonBody(request: Request, example: string): Promise<JsonBody> {
  let bytes: Uint8Array;
  try {
    bytes = await readBodyLimited(request, JSON_BODY_MAX_BYTES, "request body", "body_too_large");
  } catch (err) {
    if (err instanceof ApiError) return { ok: false, error: err };
    throw err;
  }
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") return { ok: true, value: {} };
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  if (type !== "" && !type.startsWith("application/json") && !/^application\/[\w.+-]*\+json/.test(type)) {
    return {
      ok: false,
      error: new ApiError(
        415,
        "unsupported_media_type",
        `The body is ${type.split(";")[0]}; send JSON (Content-Type: application/json), e.g. ${example}.`,
      ),
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: new ApiError(400, "bad_json", `The body is not valid JSON. Send ${example}.`) };
  }
  try {
    assertNoNul(value);
  } catch (err) {
    if (err instanceof MalformedInput) return { ok: false, error: new ApiError(400, "nul_byte", err.message) };
    throw err;
  }
  return { ok: true, value };
}

import { timingSafeEqual } from "node:crypto";
import { signatureOf } from "./signature";

/**
 * What a receiver runs on each delivery: is this body signed with our shared secret, and recent?
 * The comparison is constant-time (a timing side channel would let a forger learn the signature
 * byte by byte), and `t` must be within `toleranceS` of the receiver's clock (a captured delivery
 * replayed later is refused). Pass the body exactly as received — the raw bytes' text, not a
 * re-serialized object, whose key order or spacing would change the signature.
 */

export interface VerifyInput {
  /** The raw request body. */
  body: string;
  /** The `Bounded-Signature` header (absent: refused). */
  header: string | null | undefined;
  secret: string;
  /** How far `t` may be from now, either way. @defaultValue 300 (5 min, as Stripe's libraries) */
  toleranceS?: number;
  /** The receiver's clock, ms. @defaultValue Date.now() */
  now?: number;
}

export type VerifyResult =
  | { ok: true; t: number }
  | { ok: false; reason: "missing" | "malformed" | "stale" | "mismatch" };

export function verifyWebhook({ body, header, secret, toleranceS = 300, now = Date.now() }: VerifyInput): VerifyResult {
  if (!header) return { ok: false, reason: "missing" };
  let t: number | undefined;
  const candidates: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === "t" && /^\d{1,12}$/.test(value)) t = Number(value);
    // Several v1 values are allowed (a sender rotating its secret signs with both).
    else if (name === "v1" && /^[0-9a-f]{64}$/.test(value)) candidates.push(value);
  }
  if (t === undefined || candidates.length === 0) return { ok: false, reason: "malformed" };
  if (Math.abs(now / 1000 - t) > toleranceS) return { ok: false, reason: "stale" };
  const expected = Buffer.from(signatureOf(secret, t, body), "hex");
  const matches = candidates.some((c) => timingSafeEqual(Buffer.from(c, "hex"), expected));
  return matches ? { ok: true, t } : { ok: false, reason: "mismatch" };
}

import { createHmac } from "node:crypto";

/**
 * How a delivery is signed — the convention Stripe and GitHub use, so a receiver's usual code
 * works: `Bounded-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. The time is
 * inside the signed text, so a captured delivery cannot be replayed later with a fresh `t`.
 * No imports beyond node:crypto: a receiver can copy this file and ./verify.ts as they are.
 */

export const SIGNATURE_HEADER = "Bounded-Signature";
/** The delivery's id: the same on every retry of one delivery, so a receiver can drop duplicates. */
export const DELIVERY_HEADER = "Bounded-Delivery";

/** The hex HMAC-SHA256 of `"<t>.<body>"` under `secret`. */
export function signatureOf(secret: string, t: number, body: string): string {
  return createHmac("sha256", secret).update(`${t}.${body}`, "utf8").digest("hex");
}

/** The `Bounded-Signature` value for `body` sent at `t` (unix seconds). */
export function signatureHeader(secret: string, body: string, t: number): string {
  return `t=${t},v1=${signatureOf(secret, t, body)}`;
}

import { describe, expect, it } from "vitest";
import { signatureHeader, signatureOf } from "./signature";
import { verifyWebhook } from "./verify";

const secret = "whsec_test-secret";
const body = JSON.stringify({ id: "5b0c…", status: "completed", processed: 3 });
const now = 1_800_000_000_000;
const t = now / 1000;

describe("verifyWebhook (what a receiver runs)", () => {
  it("accepts a body signed with the shared secret within the tolerance", () => {
    expect(verifyWebhook({ body, header: signatureHeader(secret, body, t), secret, now })).toEqual({ ok: true, t });
    expect(verifyWebhook({ body, header: signatureHeader(secret, body, t - 299), secret, now }).ok).toBe(true);
  });

  it("refuses a forged signature: another secret, a changed body, a changed t", () => {
    expect(verifyWebhook({ body, header: signatureHeader("whsec_other", body, t), secret, now })).toEqual({
      ok: false,
      reason: "mismatch",
    });
    expect(
      verifyWebhook({ body: body.replace("3", "4"), header: signatureHeader(secret, body, t), secret, now }),
    ).toEqual({ ok: false, reason: "mismatch" });
    // The time is signed: moving it (to replay an old delivery as fresh) breaks the signature.
    const old = signatureOf(secret, t - 3600, body);
    expect(verifyWebhook({ body, header: `t=${t},v1=${old}`, secret, now })).toEqual({ ok: false, reason: "mismatch" });
  });

  it("refuses a stale or future t, even with a valid signature", () => {
    expect(verifyWebhook({ body, header: signatureHeader(secret, body, t - 301), secret, now })).toEqual({
      ok: false,
      reason: "stale",
    });
    expect(verifyWebhook({ body, header: signatureHeader(secret, body, t + 301), secret, now })).toEqual({
      ok: false,
      reason: "stale",
    });
    expect(
      verifyWebhook({ body, header: signatureHeader(secret, body, t - 3000), secret, now, toleranceS: 3600 }).ok,
    ).toBe(true);
  });

  it("refuses a missing or malformed header", () => {
    expect(verifyWebhook({ body, header: undefined, secret, now })).toEqual({ ok: false, reason: "missing" });
    expect(verifyWebhook({ body, header: "", secret, now })).toEqual({ ok: false, reason: "missing" });
    expect(verifyWebhook({ body, header: `t=${t}`, secret, now })).toEqual({ ok: false, reason: "malformed" });
    expect(verifyWebhook({ body, header: `v1=${signatureOf(secret, t, body)}`, secret, now })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(verifyWebhook({ body, header: `t=${t},v1=abc`, secret, now })).toEqual({ ok: false, reason: "malformed" });
  });

  it("accepts any of several v1 signatures (a sender rotating its secret)", () => {
    const header = `t=${t},v1=${signatureOf("whsec_old", t, body)},v1=${signatureOf(secret, t, body)}`;
    expect(verifyWebhook({ body, header, secret, now }).ok).toBe(true);
  });
});

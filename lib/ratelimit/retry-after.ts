/**
 * The wait an outside service asks for in its answer's headers (`Retry-After`, `retry-after-ms`).
 * Here, with the rate limits, rather than in the outbound transport (lib/http/outbound.ts, which
 * imports it): the providers' limits read it too, and lib/ratelimit imports nothing of lib/http.
 */

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const MONTH = "(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)";
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
/** RFC 9110 §5.6.7: `Sun, 06 Nov 1994 08:49:37 GMT` (the preferred form). */
const IMF_FIXDATE = new RegExp(`^[a-z]{3}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, "i");
/** The obsolete RFC 850 form: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(`^[a-z]{6,9}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, "i");
/** The obsolete asctime form, UTC by definition: `Sun Nov  6 08:49:37 1994`. */
const ASCTIME_DATE = new RegExp(`^[a-z]{3} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, "i");

/** An HTTP-date (RFC 9110 §5.6.7, all three forms) as epoch ms; undefined for anything else. */
export function parseHttpDate(value: string, now: number = Date.now()): number | undefined {
  let parts: { day: string; month: string; year: number; h: string; m: string; s: string } | undefined;
  const imf = IMF_FIXDATE.exec(value);
  const rfc850 = imf ? null : RFC850_DATE.exec(value);
  const asctime = imf || rfc850 ? null : ASCTIME_DATE.exec(value);
  if (imf) parts = { day: imf[1]!, month: imf[2]!, year: Number(imf[3]), h: imf[4]!, m: imf[5]!, s: imf[6]! };
  else if (rfc850) {
    const match = rfc850;
    // A two-digit year more than 50 years ahead is the most recent past year with those digits.
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(match[3]);
    if (year > thisYear + 50) year -= 100;
    parts = { day: match[1]!, month: match[2]!, year, h: match[4]!, m: match[5]!, s: match[6]! };
  } else if (asctime) {
    parts = {
      day: asctime[2]!,
      month: asctime[1]!,
      year: Number(asctime[6]),
      h: asctime[3]!,
      m: asctime[4]!,
      s: asctime[5]!,
    };
  }
  if (!parts) return undefined;
  const at = Date.UTC(
    parts.year,
    MONTHS.indexOf(parts.month.toLowerCase()),
    Number(parts.day),
    Number(parts.h),
    Number(parts.m),
    Number(parts.s),
  );
  return Number.isNaN(at) ? undefined : at;
}

/**
 * The wait a response asks for, in ms: `retry-after-ms` (sent by OpenAI and by the simulators,
 * whose windows are time-scaled below a second), else `Retry-After` as delay-seconds or as an
 * HTTP-date (RFC 9110 §10.2.3; a date in the past is no wait). Fractional seconds, which some
 * servers send, are read too. Taken as given, never scaled: it is the server's clock, not ours.
 * Undefined when the response asks for nothing readable.
 */
export function retryAfterMs(
  response: { header(name: string): string | undefined },
  now: number = Date.now(),
): number | undefined {
  const precise = response.header("retry-after-ms")?.trim();
  if (precise && /^\d+(\.\d+)?$/.test(precise)) return Number(precise);
  const value = response.header("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const at = parseHttpDate(value, now);
  return at === undefined ? undefined : Math.max(0, at - now);
}

import { retryAfterMs } from "./retry-after";

/**
 * What a model provider says about its own limits, in its answers' headers, read into one shape;
 * and OpenAI's duration format, which the simulator writes and Bounded reads.
 *
 * - OpenAI (and OpenAI-compatible servers): `x-ratelimit-limit-requests` / `-tokens` (per minute),
 *   `x-ratelimit-remaining-requests` / `-tokens`, `x-ratelimit-reset-requests` / `-tokens` (time
 *   until the limit is whole again, as "6m0s", "1.5s", "20ms").
 * - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
 *   the reset an RFC 3339 time.
 * Both: `retry-after` (seconds) on a 429; OpenAI also `retry-after-ms`.
 */

/** The token budgets a provider may limit: all tokens, or input and output apart (Anthropic). */
export const TOKEN_BUDGETS = ["tokens", "input", "output"] as const;
export type TokenBudget = (typeof TOKEN_BUDGETS)[number];

/** One limit as a provider announced it: per minute, what is left now, and in how many ms it is whole again. */
export interface AnnouncedLimit {
  limit: number;
  remaining: number;
  /** Real milliseconds until the budget is whole again (0 when it is). */
  resetMs: number;
}

export interface AnnouncedLimits {
  requests?: AnnouncedLimit;
  tokens: Partial<Record<TokenBudget, AnnouncedLimit>>;
}

/** A header reader: the value of one header (any case), undefined when absent. */
export type HeaderLookup = (name: string) => string | null | undefined;

/** "6m0s" → 360000, "1.5s" → 1500, "20ms" → 20, "1h2m3s", "0s"; a bare number is seconds. Undefined when unreadable. */
export function parseResetDuration(text: string | null | undefined): number | undefined {
  if (text == null) return undefined;
  const value = text.trim();
  if (value === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const unit = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1, us: 0.001, µs: 0.001, ns: 0.000001 } as const;
  const parts = /^((\d+(\.\d+)?)(ms|us|µs|ns|h|m|s))+$/.test(value)
    ? [...value.matchAll(/(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/g)]
    : null;
  if (!parts) return undefined;
  return parts.reduce((ms, [, n, u]) => ms + Number(n) * unit[u as keyof typeof unit], 0);
}

/** OpenAI's way of writing a duration: "20ms" under a second, "1.5s" under a minute, "6m0s", "1h0m0s". */
export function formatResetDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1_000) return `${whole}ms`;
  const seconds = (n: number) => `${Number(n.toFixed(3))}s`;
  if (whole < 60_000) return seconds(whole / 1000);
  const h = Math.floor(whole / 3_600_000);
  const m = Math.floor((whole % 3_600_000) / 60_000);
  const s = (whole % 60_000) / 1000;
  return h > 0 ? `${h}h${m}m${seconds(s)}` : `${m}m${seconds(s)}`;
}

const number = (v: string | null | undefined): number | undefined => {
  if (v == null || v.trim() === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
};

function announced(
  limit: number | undefined,
  remaining: number | undefined,
  resetMs: number | undefined,
): AnnouncedLimit | undefined {
  if (limit === undefined || limit <= 0) return undefined;
  return { limit, remaining: Math.min(limit, remaining ?? limit), resetMs: Math.max(0, resetMs ?? 0) };
}

/**
 * The limits an answer's headers announce (OpenAI's or Anthropic's); undefined when it announces
 * none. `now` reads Anthropic's reset times (absolute) as milliseconds from now.
 */
export function readAnnouncedLimits(header: HeaderLookup, now = Date.now()): AnnouncedLimits | undefined {
  const openai = (what: "requests" | "tokens") =>
    announced(
      number(header(`x-ratelimit-limit-${what}`)),
      number(header(`x-ratelimit-remaining-${what}`)),
      parseResetDuration(header(`x-ratelimit-reset-${what}`)),
    );
  const anthropic = (what: string) => {
    const reset = header(`anthropic-ratelimit-${what}-reset`);
    const at = reset ? Date.parse(reset) : NaN;
    return announced(
      number(header(`anthropic-ratelimit-${what}-limit`)),
      number(header(`anthropic-ratelimit-${what}-remaining`)),
      Number.isNaN(at) ? undefined : at - now,
    );
  };
  const result: AnnouncedLimits = { requests: openai("requests") ?? anthropic("requests"), tokens: {} };
  const tokens = openai("tokens") ?? anthropic("tokens");
  const input = anthropic("input-tokens");
  const output = anthropic("output-tokens");
  if (tokens) result.tokens.tokens = tokens;
  if (input) result.tokens.input = input;
  if (output) result.tokens.output = output;
  return result.requests || tokens || input || output ? result : undefined;
}

/**
 * How long a 429 asks every caller to stay away, in real ms: `retry-after-ms`, else `retry-after`
 * (seconds or an HTTP date), else the token or request reset it announces; undefined when it says nothing.
 */
export function pauseOf429(header: HeaderLookup, now = Date.now()): number | undefined {
  const asked = retryAfterMs({ header: (name) => header(name) ?? undefined }, now);
  if (asked !== undefined) return asked;
  const resets = [
    parseResetDuration(header("x-ratelimit-reset-tokens")),
    parseResetDuration(header("x-ratelimit-reset-requests")),
  ].filter((v): v is number => v !== undefined);
  return resets.length > 0 ? Math.min(...resets) : undefined;
}

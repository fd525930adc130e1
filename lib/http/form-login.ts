import "server-only";
import { recordRefusalQuietly } from "@/lib/audit/refusals";
import { readBodyLimited } from "./body";
import { clientAddress } from "@/lib/security/client-address";
import { crossOriginRefusal } from "@/lib/security/origin";
import { assertNoNul } from "@/lib/security/well-formed";
import { login, loginSchema, type LoginResult } from "@/lib/auth/login";
import { safeNext } from "@/lib/auth/safe-next";

/** What the sign-in form shows for each refusal (the page reads `?error=`). */
export const LOGIN_ERRORS = {
  invalid: "Wrong username or password.",
  throttled: "Too many failed sign-ins. Try again later.",
  missing: "Enter your username and password.",
  cross_origin: "The sign-in came from another page. Open the sign-in page of this site and try again.",
} as const;
export type LoginError = keyof typeof LOGIN_ERRORS;

const ROUTE = "POST /api/auth/login";

/** The text a person reads for a refused sign-in. */
export function loginErrorMessage(result: LoginResult | { type: "missing" }, issue?: string): string {
  if (result.type === "throttled")
    return `Too many failed sign-ins. Try again in ${Math.ceil(result.retryAfterS / 60)} min.`;
  if (result.type === "missing") return issue ?? LOGIN_ERRORS.missing;
  return LOGIN_ERRORS.invalid;
}

/**
 * Sign-in as a plain HTML form post (no JavaScript needed) or a JSON call. With
 * `Referrer-Policy: no-referrer` a form post says `Origin: null`, which a server action refuses;
 * this route accepts it when `Sec-Fetch-Site: same-origin` says the form was ours (a sign-in
 * from another site's page could sign the visitor in as someone else). A form gets a 303 to
 * where it was going, or back to the form with the error; JSON gets 200, 401 or 429 with
 * Retry-After.
 */
export async function formLogin(request: Request): Promise<Response> {
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  const isForm = type.startsWith("application/x-www-form-urlencoded");
  const text = new TextDecoder().decode(await readBodyLimited(request, 8 * 1024, "sign-in form", "body_too_large"));
  let fields: Record<string, unknown> = {};
  try {
    fields = isForm
      ? Object.fromEntries(new URLSearchParams(text))
      : (JSON.parse(text || "{}") as Record<string, unknown>);
    assertNoNul(fields);
  } catch {
    fields = {};
  }
  const next = safeNext(fields.next);
  const username = typeof fields.username === "string" ? fields.username.slice(0, 64) : "";
  const back = (error: LoginError, headers: Record<string, string> = {}) =>
    new Response(null, {
      status: 303,
      headers: { Location: `/login?${new URLSearchParams({ error, next, username })}`, ...headers },
    });
  const address = await clientAddress();
  const refuse = async (status: number, error: LoginError, message: string, headers: Record<string, string> = {}) => {
    if (status !== 422) await recordRefusalQuietly({ principal: null, address, route: ROUTE, status, reason: message });
    return isForm ? back(error, headers) : Response.json({ error: { code: error, message } }, { status, headers });
  };

  const crossOrigin = crossOriginRefusal(request.headers);
  if (crossOrigin) return refuse(403, "cross_origin", crossOrigin);
  const parsed = loginSchema.safeParse(fields);
  if (!parsed.success) return refuse(422, "missing", parsed.error.issues[0]?.message ?? LOGIN_ERRORS.missing);
  const result = await login(parsed.data, address);
  switch (result.type) {
    case "throttled":
      return refuse(429, "throttled", loginErrorMessage(result), { "Retry-After": String(result.retryAfterS) });
    case "invalid":
      return refuse(401, "invalid", LOGIN_ERRORS.invalid);
    case "ok":
      return isForm
        ? new Response(null, { status: 303, headers: { Location: next } })
        : Response.json({ username: result.username, next });
  }
}

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { APIConnectionError, APIError } from "openai";
import type { Env } from "@/lib/env";
import { SIMULATOR_PATHS } from "@/lib/env";
import { formatDuration } from "@/lib/format/duration";
import { describeError, snippet } from "@/lib/format/describe";
import { attemptRequest, serviceMessage, type OutboundAttempt } from "@/lib/http/outbound";
import { marketplacePageSchema } from "@/lib/marketplace/schemas";
import { modelClient } from "@/lib/modelcalls/chat-completion";
import { parseModelRouting, providerVariables, type ModelProvider, type ModelService } from "@/lib/model-providers";
import { serviceName } from "@/lib/ratelimit/breaker-services";
import { readAnnouncedLimits, type AnnouncedLimit, type HeaderLookup } from "@/lib/ratelimit/provider-headers";

/**
 * One small, harmless call to each outside service Bounded is configured for, and what it says:
 * whether the service answered, took the key, serves the model, which limits its headers
 * announce, and how long the round trip took. Every problem is one sentence naming the setting to
 * look at. A call that gets no answer is given up after `timeoutMs`: a hung provider is reported,
 * never waited for. The key is never printed, not even in a provider's own message.
 */

/** What was checked: a model provider's service (`model`, `model:backup`), OCR, the marketplace, images. */
export type CheckedService = ModelService | "ocr" | "marketplace" | "images";

export interface ServiceCheck {
  service: CheckedService;
  /** Where the call went (the base URL as configured). */
  url: string;
  /** True when the base URL is the bundled simulators' default. */
  simulated: boolean;
  ok: boolean;
  /** Round trip of the call in real ms; undefined when nothing came back. */
  roundTripMs?: number;
  /** Facts found, one per line ("auth: ok (MODEL_API_KEY)"). */
  details: string[];
  /** What is wrong, one sentence; undefined when ok. */
  problem?: string;
}

export interface CheckOptions {
  env: Env;
  /** The model providers to check. @defaultValue the primary alone, from `env` */
  providers?: readonly ModelProvider[];
  /** How long one call may go unanswered before the service is reported silent (real ms). */
  timeoutMs: number;
}

const NAMES: Record<Exclude<CheckedService, ModelService> | "model", string> = {
  model: "The model service",
  ocr: "The OCR service",
  marketplace: "The marketplace",
  images: "The image provider",
};

/** Replaces every occurrence of the configured key in a provider's text, should it echo it whole. */
function withoutKey(text: string, key: string | undefined, variable: string): string {
  return key ? text.split(key).join(`[${variable}]`) : text;
}

const perMinute = (what: string, l: AnnouncedLimit) =>
  `${l.limit.toLocaleString("en-US")} ${what} per minute (${l.remaining.toLocaleString("en-US")} left${l.resetMs > 0 ? `, whole again in ${formatDuration(l.resetMs)}` : ""})`;

/** The limits an answer's headers announce, as a line; "none announced" when it sends none. */
export function describeAnnouncedLimits(header: HeaderLookup): string {
  const limits = readAnnouncedLimits(header);
  if (!limits) return "limits: none announced (no x-ratelimit-* or anthropic-ratelimit-* headers)";
  const parts: string[] = [];
  if (limits.requests) parts.push(perMinute("requests", limits.requests));
  if (limits.tokens.tokens) parts.push(perMinute("tokens", limits.tokens.tokens));
  if (limits.tokens.input) parts.push(perMinute("input tokens", limits.tokens.input));
  if (limits.tokens.output) parts.push(perMinute("output tokens", limits.tokens.output));
  return `limits: ${parts.join("; ")}`;
}

/** What every check of the model call reads: the service as configured and the client that called it. */
interface ModelCheck {
  base: Pick<ServiceCheck, "service" | "url" | "simulated">;
  /** "The model service at {url}", the start of every problem's sentence. */
  at: string;
  /** The variables that configure the provider, named in what to check. */
  vars: { url: string; key: string; model: string };
  key: string | undefined;
  model: string;
  client: ReturnType<typeof modelClient>;
  timeoutMs: number;
}

/** An HTTP error answer of the model service, as the checks of its status read it. */
interface ModelRefusal {
  status: number;
  /** The service's own words for it, the key taken out. */
  message: string;
  code: string | undefined;
  /** "{at} answered {status}: {message}". */
  answered: string;
  /** The lines every report of an answer starts with. */
  details: string[];
  roundTripMs: number;
  headers: HeaderLookup;
}

/** One row of the table of refusals: when it applies, and what the check then reports. */
interface RefusalCheck {
  when: (r: ModelRefusal) => boolean;
  report: (check: ModelCheck, r: ModelRefusal) => ServiceCheck | Promise<ServiceCheck>;
}

/** A model provider as configured, and the client the workers would call it with. */
function modelCheck(provider: ModelProvider, env: Env, timeoutMs: number): ModelCheck {
  const { baseUrl: url, model } = provider;
  const key = provider.apiKey || undefined;
  const base = {
    service: provider.service,
    url,
    simulated: [SIMULATOR_PATHS.MODEL_BASE_URL, SIMULATOR_PATHS.BACKUP_MODEL_BASE_URL].some(
      (path) => url === simulatorBase(env, path),
    ),
  };
  const name = serviceName(provider.service);
  const at = `${provider.service === "model" ? NAMES.model : name.charAt(0).toUpperCase() + name.slice(1)} at ${url}`;
  const [urlVar, keyVar, modelVar] = providerVariables(provider.service).split(", ") as [string, string, string];
  const client = modelClient({ baseUrl: url, apiKey: key });
  return { base, at, vars: { url: urlVar, key: keyVar, model: modelVar }, key, model, client, timeoutMs };
}

/** The completion came back: the service is reachable, takes the key and serves the model. */
function modelAnswered(
  { base, key, model, vars }: ModelCheck,
  answeredAs: string | undefined,
  response: Response,
  roundTripMs: number,
): ServiceCheck {
  return {
    ...base,
    ok: true,
    roundTripMs,
    details: [
      `reachable: yes, answered ${response.status} in ${formatDuration(roundTripMs)}`,
      key
        ? `auth: ok (${vars.key} accepted)`
        : `auth: no key configured (${vars.key} unset), and the service asked for none`,
      `model: ${model} exists${answeredAs && answeredAs !== model ? ` (answered as ${answeredAs})` : ""}`,
      describeAnnouncedLimits((name) => response.headers.get(name)),
    ],
  };
}

/** No answer within the time limit. */
function modelSilent({ base, at, timeoutMs }: ModelCheck): ServiceCheck {
  return {
    ...base,
    ok: false,
    details: [`reachable: no answer within ${formatDuration(timeoutMs)}`],
    problem: `${at} did not answer within ${formatDuration(timeoutMs)} — it is silent or unreachable: check the provider's status page and the network between here and it.`,
  };
}

/** No HTTP answer at all: the connection failed, or something other than the service's status went wrong. */
function modelUnreachable({ base, at, vars }: ModelCheck, err: unknown): ServiceCheck {
  const cause = err instanceof APIConnectionError && err.cause ? err.cause : err;
  return {
    ...base,
    ok: false,
    details: [`reachable: no (${describeError(cause)})`],
    problem: `${at} could not be reached (${describeError(cause)}) — check ${vars.url}.`,
  };
}

/** An HTTP error answer read once for the checks of its status: its words (without the key), its code, its headers. */
function readRefusal({ at, key, vars }: ModelCheck, err: APIError, status: number, roundTripMs: number): ModelRefusal {
  const body = err.error as { message?: unknown; code?: unknown } | undefined;
  const message = withoutKey(
    typeof body?.message === "string" && body.message
      ? body.message
      : snippet(err.message.replace(/^\d{3} /, "")) || "(no body)",
    key,
    vars.key,
  );
  return {
    status,
    message,
    code: typeof body?.code === "string" ? body.code : undefined,
    answered: `${at} answered ${status}: ${message}`,
    details: [`reachable: yes, answered ${status} in ${formatDuration(roundTripMs)}`],
    roundTripMs,
    headers: (name: string) => err.headers?.get(name),
  };
}

/** A failed report of an error answer: its round trip, its lines and the sentence naming what to check. */
const refused = (check: ModelCheck, r: ModelRefusal, details: string[], problem: string): ServiceCheck => ({
  ...check.base,
  ok: false,
  roundTripMs: r.roundTripMs,
  details,
  problem,
});

/** The error answers the model check tells apart, first match wins; any other is `otherRefusal`. */
const REFUSALS: RefusalCheck[] = [
  /** The key refused (or wanted and not set). */
  {
    when: (r) => r.status === 401 || r.status === 403,
    report: (check, r) =>
      refused(
        check,
        r,
        [...r.details, `auth: refused (${check.key ? `${check.vars.key} is set` : `no ${check.vars.key} set`})`],
        `${r.answered} — check ${check.vars.key}.`,
      ),
  },
  /** A 404 that is the model's, not the path's: the models the service does serve are looked up. */
  {
    when: (r) =>
      r.status === 404 && r.code !== "unknown_url" && (r.code === "model_not_found" || /model/i.test(r.message)),
    report: modelNotServed,
  },
  /** Any other 404 is the path's: the base URL is wrong. */
  {
    when: (r) => r.status === 404,
    report: (check, r) =>
      refused(
        check,
        r,
        r.details,
        `${r.answered} — check ${check.vars.url}: it is the API's base URL with /v1 (e.g. https://api.openai.com/v1), to which /chat/completions is added.`,
      ),
  },
  /** OpenAI's 429 for an account without credit: no wait ends it. */
  {
    when: (r) => r.status === 429 && r.code === "insufficient_quota",
    report: (check, r) =>
      refused(
        check,
        r,
        [...r.details, "auth: ok", "quota: none left"],
        `${r.answered} — the account has no quota left: check the provider's plan and billing.`,
      ),
  },
  /** The key works and the model exists: the account's limits are spent for the moment. */
  { when: (r) => r.status === 429, report: rateLimited },
  /** The provider failing. */
  {
    when: (r) => r.status >= 500,
    report: (check, r) =>
      refused(check, r, r.details, `${r.answered} — the provider is failing: check its status page, then try again.`),
  },
];

/** A 404 for the model: the sentence names the models the service lists, when it lists them. */
async function modelNotServed(check: ModelCheck, r: ModelRefusal): Promise<ServiceCheck> {
  const served = await listModels(check.client, check.timeoutMs);
  const tail =
    served && served.length > 0
      ? ` It serves: ${served.slice(0, 10).join(", ")}${served.length > 10 ? ", …" : ""}.`
      : "";
  return refused(
    check,
    r,
    [...r.details, "auth: ok", `model: ${check.model} not served`],
    `${r.answered} — check ${check.vars.model}.${tail}`,
  );
}

/** A 429 that is not about quota: reported, not a problem, with the limits the headers announce. */
function rateLimited({ base, model }: ModelCheck, r: ModelRefusal): ServiceCheck {
  return {
    ...base,
    ok: true,
    roundTripMs: r.roundTripMs,
    details: [
      ...r.details,
      "auth: ok",
      `model: ${model} exists`,
      `rate limited right now: ${r.message}`,
      describeAnnouncedLimits(r.headers),
    ],
  };
}

/** An error answer none of the table's rows knows. */
function otherRefusal(check: ModelCheck, r: ModelRefusal): ServiceCheck {
  return refused(
    check,
    r,
    r.details,
    `${r.answered} — check ${check.vars.model} and that ${check.vars.url} is an OpenAI-compatible chat completions API.`,
  );
}

/**
 * A 1-token chat completion through the client the workers use (`modelClient`: the same base URL,
 * key and transport). A 404 that is not the path's is the model's; then the models the service
 * lists are looked up, so the sentence can say which ones it does serve.
 */
export async function checkModel(
  { env, timeoutMs }: CheckOptions,
  provider: ModelProvider = parseModelRouting({}, env).providers[0]!,
): Promise<ServiceCheck> {
  const check = modelCheck(provider, env, timeoutMs);
  const signal = AbortSignal.timeout(timeoutMs);
  const started = performance.now();
  try {
    const { data, response } = await check.client.chat.completions
      .create(
        { model: check.model, messages: [{ role: "user", content: "Reply with OK." }], max_completion_tokens: 1 },
        { signal },
      )
      .withResponse();
    return modelAnswered(check, data.model, response, performance.now() - started);
  } catch (err) {
    const roundTripMs = performance.now() - started;
    if (signal.aborted) return modelSilent(check);
    if (!(err instanceof APIError) || err.status === undefined || err instanceof APIConnectionError)
      return modelUnreachable(check, err);
    const refusal = readRefusal(check, err, err.status, roundTripMs);
    const row = REFUSALS.find((c) => c.when(refusal));
    return row ? await row.report(check, refusal) : otherRefusal(check, refusal);
  }
}

async function listModels(client: ReturnType<typeof modelClient>, timeoutMs: number): Promise<string[] | undefined> {
  try {
    const ids: string[] = [];
    for await (const m of client.models.list({ signal: AbortSignal.timeout(timeoutMs) })) ids.push(m.id);
    return ids;
  } catch {
    return undefined; // not every compatible server lists its models
  }
}

function simulatorBase(env: Env, path: string): string {
  return `http://127.0.0.1:${env.BOUNDED_SIM_PORT}${path}`;
}

/** The sentence for an outbound call that got no usable answer, naming the setting to check. */
function failedCall(
  service: Exclude<CheckedService, ModelService>,
  url: string,
  setting: string,
  attempt: Exclude<OutboundAttempt, { ok: true }>,
  timeoutMs: number,
): Pick<ServiceCheck, "problem" | "details"> {
  const at = `${NAMES[service]} at ${url}`;
  switch (attempt.kind) {
    case "aborted":
    case "timeout":
      return {
        details: [`reachable: no answer within ${formatDuration(timeoutMs)}`],
        problem: `${at} did not answer within ${formatDuration(timeoutMs)} — it is silent or unreachable: check the service's status and the network between here and it.`,
      };
    case "unreachable":
      return {
        details: [`reachable: no (${describeError(attempt.cause)})`],
        problem: `${at} could not be reached (${describeError(attempt.cause)}) — check ${setting}.`,
      };
    default: {
      const said = serviceMessage(attempt.response.body) ?? (snippet(attempt.response.body) || "(no body)");
      const hint =
        attempt.status >= 500
          ? "the service is failing: check its status, then try again"
          : attempt.status === 401 || attempt.status === 403
            ? `it wants credentials Bounded does not send: check ${setting}`
            : `check ${setting}`;
      return {
        details: [`reachable: yes, answered ${attempt.status}`],
        problem: `${at} answered ${attempt.status}: ${said} — ${hint}.`,
      };
    }
  }
}

/**
 * A 429 is an answer: the service is there and takes the request, its rate limit is spent for the
 * moment (another caller's, or this deployment's own traffic). Reported, not a problem.
 */
function throttled(
  attempt: OutboundAttempt,
  roundTripMs: number,
): Pick<ServiceCheck, "ok" | "roundTripMs" | "details"> | undefined {
  if (attempt.ok || attempt.kind !== "throttled") return undefined;
  const wait = attempt.retryAfterMs === undefined ? "" : `; it asks to wait ${formatDuration(attempt.retryAfterMs)}`;
  return {
    ok: true,
    roundTripMs,
    details: [
      `reachable: yes, answered 429 in ${formatDuration(roundTripMs)} (its rate limit is spent right now${wait})`,
    ],
  };
}

async function timed(run: () => Promise<OutboundAttempt>): Promise<{ attempt: OutboundAttempt; roundTripMs: number }> {
  const started = performance.now();
  const attempt = await run();
  return { attempt, roundTripMs: performance.now() - started };
}

/** One page of plain text to `POST {OCR_BASE_URL}/ocr`: the smallest document there is. */
export async function checkOcr({ env, timeoutMs }: CheckOptions): Promise<ServiceCheck> {
  const url = env.OCR_BASE_URL ?? `http://127.0.0.1:${env.BOUNDED_SIM_PORT}`;
  const base = { service: "ocr" as const, url, simulated: env.OCR_BASE_URL === undefined };
  const { attempt, roundTripMs } = await timed(() =>
    attemptRequest({
      method: "POST",
      url: new URL(`${url.replace(/\/+$/, "")}/ocr`),
      body: "Bounded provider check",
      headers: { "content-type": "text/plain", accept: "application/json" },
      timeoutMs,
    }),
  );
  const busy = throttled(attempt, roundTripMs);
  if (busy) return { ...base, ...busy };
  if (!attempt.ok) return { ...base, ok: false, ...failedCall("ocr", url, "OCR_BASE_URL", attempt, timeoutMs) };
  const page = safeJson(attempt.response.body) as { pages?: unknown } | undefined;
  if (!Number.isInteger(page?.pages)) {
    return {
      ...base,
      ok: false,
      roundTripMs,
      details: [`reachable: yes, answered ${attempt.response.status}`],
      problem: `${NAMES.ocr} at ${url} answered something other than { text, pages }: ${snippet(attempt.response.body)} — check OCR_BASE_URL.`,
    };
  }
  return {
    ...base,
    ok: true,
    roundTripMs,
    details: [
      `reachable: yes, answered ${attempt.response.status} in ${formatDuration(roundTripMs)}, a one-line document read as ${page!.pages === 1 ? "1 page" : `${String(page!.pages)} pages`}`,
    ],
  };
}

/** The first orders page of a seller no one has (`provider-check`): one request of a family allowing 10 a minute. */
export async function checkMarketplace({ env, timeoutMs }: CheckOptions): Promise<ServiceCheck> {
  const url = env.MARKETPLACE_BASE_URL;
  const base = {
    service: "marketplace" as const,
    url,
    simulated: url === simulatorBase(env, SIMULATOR_PATHS.MARKETPLACE_BASE_URL),
  };
  const target = new URL(`${url.replace(/\/+$/, "")}/orders`);
  target.searchParams.set("tenant", "provider-check");
  target.searchParams.set("page", "1");
  const { attempt, roundTripMs } = await timed(() =>
    attemptRequest({ method: "GET", url: target, headers: { accept: "application/json" }, timeoutMs }),
  );
  const busy = throttled(attempt, roundTripMs);
  if (busy) return { ...base, ...busy };
  if (!attempt.ok)
    return { ...base, ok: false, ...failedCall("marketplace", url, "MARKETPLACE_BASE_URL", attempt, timeoutMs) };
  if (!marketplacePageSchema.safeParse(safeJson(attempt.response.body)).success) {
    return {
      ...base,
      ok: false,
      roundTripMs,
      details: [`reachable: yes, answered ${attempt.response.status}`],
      problem: `${NAMES.marketplace} at ${url} answered something other than a page of orders: ${snippet(attempt.response.body)} — check MARKETPLACE_BASE_URL.`,
    };
  }
  return {
    ...base,
    ok: true,
    roundTripMs,
    details: [
      `reachable: yes, answered ${attempt.response.status} in ${formatDuration(roundTripMs)} with a page of orders`,
    ],
  };
}

/**
 * The status of a generation that does not exist: nothing is rendered or paid. The provider
 * answers 404 in its JSON error shape; a 404 that is not (an HTML page, an unknown URL) means the
 * base URL is wrong.
 */
export async function checkImages({ env, timeoutMs }: CheckOptions): Promise<ServiceCheck> {
  const url = env.IMAGE_PROVIDER_BASE_URL;
  const base = {
    service: "images" as const,
    url,
    simulated: url === simulatorBase(env, SIMULATOR_PATHS.IMAGE_PROVIDER_BASE_URL),
  };
  const target = new URL(`${url.replace(/\/+$/, "")}/generations/provider-check-${randomUUID()}`);
  const { attempt, roundTripMs } = await timed(() =>
    attemptRequest({ method: "GET", url: target, headers: { accept: "application/json" }, timeoutMs }),
  );
  const notFound =
    !attempt.ok && attempt.kind === "rejected" && attempt.status === 404
      ? (safeJson(attempt.response.body) as { error?: { code?: unknown; message?: unknown } } | undefined)
      : undefined;
  if (notFound?.error && notFound.error.code !== "unknown_url") {
    return {
      ...base,
      ok: true,
      roundTripMs,
      details: [
        `reachable: yes, answered 404 for a generation that does not exist in ${formatDuration(roundTripMs)}, as it should`,
      ],
    };
  }
  if (attempt.ok)
    return {
      ...base,
      ok: true,
      roundTripMs,
      details: [`reachable: yes, answered ${attempt.response.status} in ${formatDuration(roundTripMs)}`],
    };
  const busy = throttled(attempt, roundTripMs);
  if (busy) return { ...base, ...busy };
  return {
    ...base,
    ok: false,
    roundTripMs: attempt.kind === "rejected" ? roundTripMs : undefined,
    ...failedCall("images", url, "IMAGE_PROVIDER_BASE_URL", attempt, timeoutMs),
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * How long one call may go unanswered: a 1-token completion comes back in a second or two from a
 * healthy provider, and even its slow tail (p99 of full calls ~35 s) is rare for so small a call;
 * 20 s says "silent" without making a person wait for a hung service's own timeout.
 */
export const DEFAULT_CHECK_TIMEOUT_S = 20;

export const PROVIDER_CHECK_USAGE = "usage: npm run provider:check [-- --timeout <seconds>]";

/** The command line's `--timeout <seconds>` in ms, or the sentence saying what is wrong with it. */
export function parseCheckArgs(args: string[]): { timeoutMs: number } | { error: string } {
  let values: { timeout?: string };
  try {
    ({ values } = parseArgs({ args, options: { timeout: { type: "string" } } }));
  } catch (err) {
    return { error: (err as Error).message };
  }
  if (values.timeout === undefined) return { timeoutMs: DEFAULT_CHECK_TIMEOUT_S * 1000 };
  const seconds = Number(values.timeout);
  if (values.timeout.trim() === "" || !Number.isFinite(seconds) || seconds <= 0 || seconds > 600) {
    return {
      error: `--timeout must be a number of seconds above 0 and at most 600, got ${JSON.stringify(values.timeout)}`,
    };
  }
  return { timeoutMs: seconds * 1000 };
}

/**
 * Every service at once, each model provider among them: the slowest decides how long the check
 * takes, at most `timeoutMs` (twice for a model that is not served).
 */
export function checkServices(options: CheckOptions): Promise<ServiceCheck[]> {
  const providers = options.providers ?? parseModelRouting({}, options.env).providers;
  return Promise.all([
    ...providers.map((provider) => checkModel(options, provider)),
    checkOcr(options),
    checkMarketplace(options),
    checkImages(options),
  ]);
}

/** The report a person reads: one block per service, then one sentence per problem. */
export function formatReport(checks: ServiceCheck[], timeoutMs: number): string {
  const width = Math.max(12, ...checks.map((c) => c.service.length + 2));
  const lines = [
    `Checking ${checks.length} outside services with one small call each (no answer within ${formatDuration(timeoutMs)} counts as silent).`,
    "",
  ];
  for (const c of checks) {
    lines.push(
      `${c.service.padEnd(width)}${(c.ok ? "ok" : "PROBLEM").padEnd(9)}${c.url}${c.simulated ? " (the bundled simulator)" : ""}`,
    );
    for (const d of c.details) lines.push(`${" ".repeat(width)}${d}`);
  }
  const problems = checks.filter((c) => c.problem);
  lines.push("");
  if (problems.length === 0) lines.push(`All ${checks.length} services answered as expected.`);
  else {
    lines.push(`Problems (${problems.length} of ${checks.length} services):`);
    for (const c of problems) lines.push(`- ${c.problem}`);
  }
  return lines.join("\n");
}

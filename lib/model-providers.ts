import { z } from "zod";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { env, EnvError, type Env } from "@/lib/env";

/**
 * The model providers Bounded may call, and the route each job kind's calls take through them.
 *
 * The primary is the provider of `MODEL_BASE_URL`, `MODEL_API_KEY` and `MODEL_NAME`, limited by
 * `BOUNDED_PROVIDER_MODEL_*` and `BOUNDED_MODEL_TPM`, as before there was any other. More are named
 * in `BOUNDED_MODEL_PROVIDERS` (comma-separated, lower-case: `backup`), each with variables of its
 * own, its name upper-cased in them:
 *
 * - `MODEL_<NAME>_BASE_URL` (required), `MODEL_<NAME>_API_KEY`, `MODEL_<NAME>_NAME` (required: the model asked for);
 * - `BOUNDED_PROVIDER_MODEL_<NAME>_CONCURRENCY` (default 8) and `_RPS` (default 5), `BOUNDED_MODEL_<NAME>_TPM`.
 *
 * A route is a list of providers, first the one its calls go to, then the fallbacks a call goes to
 * while every provider before it on the route is down (its circuit breaker open, misconfigured or
 * half-open: failed, silent, or refusing our configuration): `BOUNDED_MODEL_ROUTE` for every kind
 * (default `primary`: no fallback), `BOUNDED_MODEL_ROUTE_<KIND>` for one (`BOUNDED_MODEL_ROUTE_AGENT_RUN=primary,backup`).
 * A route of one provider never fails over: its calls wait for it, as every call did before.
 * `BOUNDED_MODEL_FAILOVER` (and `BOUNDED_MODEL_FAILOVER_<KIND>`) says when a call leaves a provider
 * for the next: `deadline` (the default: while it is down, and when it cannot answer in what is
 * left of the job's budget), `outage` (while it is down only) or `never` (the route's first alone).
 *
 * Each provider is an outside service of its own (`service`): its own circuit breaker, silence
 * detection, provider slots, token limits learnt from its headers, latency and cost. Every mistake
 * in this configuration is one line of the `EnvError` thrown at start-up.
 */

/**
 * A model provider's service: `model` for the primary, `model:<name>` for each other one — each an
 * outside service (lib/ratelimit/breaker-services.ts) with a breaker, silence detection and limits of its own.
 */
export type ModelService = "model" | `model:${string}`;

/** The provider of `MODEL_BASE_URL`: its name in routes and on the pages. */
export const PRIMARY_PROVIDER = "primary";

export interface ModelProvider {
  /** As routes and pages name it: `primary`, or as `BOUNDED_MODEL_PROVIDERS` does. */
  name: string;
  /** Its breaker's, limiter's and metrics' service: `model` for the primary, `model:<name>` for another. */
  service: ModelService;
  /** With `/v1`, as the OpenAI client takes it. */
  baseUrl: string;
  apiKey: string | undefined;
  /** The model asked for. */
  model: string;
  /** Calls in flight at once and requests per production second, shared by every worker process. */
  concurrency: number;
  rps: number;
  /** Tokens per production minute, when configured (else learnt from its headers). */
  tpm: number | undefined;
}

/**
 * When a call leaves a provider of its route for the next one: `never` (the first provider alone,
 * whatever happens: the answer must come from it), `outage` (while it is down), `deadline` (while
 * it is down, and when it cannot answer in what is left of the job's budget: lib/modelcalls/failover.ts).
 */
export const FAILOVER_POLICIES = ["never", "outage", "deadline"] as const;
export type FailoverPolicy = (typeof FAILOVER_POLICIES)[number];

export interface ModelRouting {
  providers: ModelProvider[];
  /** The route of every kind without one of its own. */
  defaultRoute: ModelProvider[];
  /** Routes of kinds that have their own. */
  routes: Partial<Record<string, ModelProvider[]>>;
  /** The failover policy of every kind without one of its own, and those of kinds that have their own. */
  defaultFailover: FailoverPolicy;
  failover: Partial<Record<string, FailoverPolicy>>;
  /** What failover may spend on fallbacks (lib/modelcalls/failover-spend.ts). */
  ceiling: FailoverCeiling;
}

/**
 * USD a job's calls, and a tenant's calls in a UTC day, may spend on fallback providers
 * (`BOUNDED_FAILOVER_MAX_USD_PER_JOB`, `BOUNDED_FAILOVER_MAX_USD_PER_TENANT_DAY`); undefined: no ceiling.
 * Past one, a call does not fail over: it waits for the provider before it, and its job says why.
 */
export interface FailoverCeiling {
  perJobUsd: number | undefined;
  perTenantDayUsd: number | undefined;
}

const NAME = /^[a-z][a-z0-9]*$/;
const url = z.url();
const limit = (max: number) => z.coerce.number().int().min(1).max(max);

/** A variable's value, empty meaning unset (as `parseEnv` reads it). */
function read(source: Record<string, string | undefined>, name: string): string | undefined {
  const value = source[name];
  return value === undefined || value === "" ? undefined : value;
}

/** A comma-separated list, trimmed, without empty entries. */
function list(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** One extra provider from its variables; its mistakes pushed to `mistakes`. */
function extraProvider(
  name: string,
  source: Record<string, string | undefined>,
  mistakes: string[],
): ModelProvider | null {
  const upper = name.toUpperCase();
  const v = {
    baseUrl: `MODEL_${upper}_BASE_URL`,
    apiKey: `MODEL_${upper}_API_KEY`,
    model: `MODEL_${upper}_NAME`,
    concurrency: `BOUNDED_PROVIDER_MODEL_${upper}_CONCURRENCY`,
    rps: `BOUNDED_PROVIDER_MODEL_${upper}_RPS`,
    tpm: `BOUNDED_MODEL_${upper}_TPM`,
  };
  const before = mistakes.length;
  const required = (variable: string, what: string) => {
    const value = read(source, variable);
    if (value === undefined)
      mistakes.push(
        `${variable}: required for the model provider "${name}" named in BOUNDED_MODEL_PROVIDERS (${what})`,
      );
    return value;
  };
  const baseUrl = required(v.baseUrl, "its API's base URL, with /v1, as https://api.openai.com/v1");
  if (baseUrl !== undefined && !url.safeParse(baseUrl).success)
    mistakes.push(
      `${v.baseUrl}: must be a URL, as https://api.openai.com/v1 (got ${JSON.stringify(baseUrl.slice(0, 80))})`,
    );
  const model = required(v.model, "the model to ask for");
  const number = (variable: string, fallback: number | undefined, schema: z.ZodType<number>) => {
    const value = read(source, variable);
    if (value === undefined) return fallback;
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    mistakes.push(`${variable}: ${parsed.error.issues[0]!.message} (got ${JSON.stringify(value.slice(0, 40))})`);
    return fallback;
  };
  const concurrency = number(v.concurrency, 8, limit(10_000));
  const rps = number(v.rps, 5, z.coerce.number().positive().max(100_000));
  const tpm = number(v.tpm, undefined, limit(1_000_000_000));
  if (mistakes.length > before) return null;
  return {
    name,
    service: `model:${name}`,
    baseUrl: baseUrl!,
    apiKey: read(source, v.apiKey),
    model: model!,
    concurrency: concurrency!,
    rps: rps!,
    tpm,
  };
}

/** A route variable's providers; its mistakes pushed to `mistakes`. */
function route(
  variable: string,
  value: string,
  byName: Map<string, ModelProvider>,
  mistakes: string[],
): ModelProvider[] {
  const names = list(value);
  if (names.length === 0) mistakes.push(`${variable}: names no provider; give at least one, as primary`);
  const seen = new Set<string>();
  const providers: ModelProvider[] = [];
  for (const name of names) {
    const provider = byName.get(name);
    if (!provider)
      mistakes.push(`${variable}: "${name}" is not a model provider (there are: ${[...byName.keys()].join(", ")})`);
    else if (seen.has(name)) mistakes.push(`${variable}: names "${name}" twice`);
    else providers.push(provider);
    seen.add(name);
  }
  return providers;
}

/**
 * The providers and routes of an environment (`source` the raw variables, `e` the parsed ones);
 * throws an `EnvError` with one line per mistake.
 */
export function parseModelRouting(source: Record<string, string | undefined>, e: Env): ModelRouting {
  const mistakes: string[] = [];
  const primary: ModelProvider = {
    name: PRIMARY_PROVIDER,
    service: "model",
    baseUrl: e.MODEL_BASE_URL,
    apiKey: e.MODEL_API_KEY,
    model: e.MODEL_NAME,
    concurrency: e.BOUNDED_PROVIDER_MODEL_CONCURRENCY,
    rps: e.BOUNDED_PROVIDER_MODEL_RPS,
    tpm: e.BOUNDED_MODEL_TPM,
  };
  const byName = new Map<string, ModelProvider>([[PRIMARY_PROVIDER, primary]]);
  for (const name of list(read(source, "BOUNDED_MODEL_PROVIDERS"))) {
    if (!NAME.test(name))
      mistakes.push(
        `BOUNDED_MODEL_PROVIDERS: "${name.slice(0, 40)}" is not a provider name: a lower-case letter, then lower-case letters and digits (its variables are named after it)`,
      );
    else if (byName.has(name))
      mistakes.push(
        `BOUNDED_MODEL_PROVIDERS: names "${name}" ${name === PRIMARY_PROVIDER ? "(the provider of MODEL_BASE_URL, always there)" : "twice"}`,
      );
    else {
      const provider = extraProvider(name, source, mistakes);
      if (provider) byName.set(name, provider);
    }
  }
  const toRoute = (variable: string, value: string) => route(variable, value, byName, mistakes);
  const toPolicy = (variable: string, value: string) => policy(variable, value, mistakes);
  const defaultRoute = withDefault(source, "BOUNDED_MODEL_ROUTE", toRoute, [primary]);
  const routes = perKind(source, "BOUNDED_MODEL_ROUTE_", toRoute, mistakes);
  const defaultFailover = withDefault(source, "BOUNDED_MODEL_FAILOVER", toPolicy, "deadline");
  const failover = perKind(source, "BOUNDED_MODEL_FAILOVER_", toPolicy, mistakes);
  const ceiling = failoverCeiling(source, mistakes);
  const routing = { providers: [...byName.values()], defaultRoute, routes, defaultFailover, failover, ceiling };
  if (ceiling.perJobUsd !== undefined || ceiling.perTenantDayUsd !== undefined)
    for (const name of fallbackNames(routing))
      if (!e.BOUNDED_MODEL_PRICES[byName.get(name)!.model])
        mistakes.push(
          `BOUNDED_MODEL_PRICES: has no price for ${byName.get(name)!.model}, the model of the fallback "${name}": a failover cost ceiling needs one`,
        );
  if (mistakes.length > 0)
    throw new EnvError(
      `the model providers are not configured right:\n${mistakes.map((m) => `  - ${m}`).join("\n")}\nFix them in the environment or .env, see .env.example.`,
    );
  return routing;
}

/** The failover cost ceilings; a value that is not a positive number is a mistake. */
function failoverCeiling(source: Record<string, string | undefined>, mistakes: string[]): FailoverCeiling {
  const usd = (variable: string) => {
    const value = read(source, variable);
    if (value === undefined) return undefined;
    const parsed = z.coerce.number().positive().finite().safeParse(value);
    if (parsed.success) return parsed.data;
    mistakes.push(`${variable}: must be a positive amount of USD, as 0.50 (got ${JSON.stringify(value.slice(0, 40))})`);
    return undefined;
  };
  return {
    perJobUsd: usd("BOUNDED_FAILOVER_MAX_USD_PER_JOB"),
    perTenantDayUsd: usd("BOUNDED_FAILOVER_MAX_USD_PER_TENANT_DAY"),
  };
}

/** A variable's value read by `parse`, or `fallback` when it is unset. */
function withDefault<T>(
  source: Record<string, string | undefined>,
  variable: string,
  parse: (variable: string, value: string) => T,
  fallback: T,
): T {
  const value = read(source, variable);
  return value === undefined ? fallback : parse(variable, value);
}

/** Every `<prefix><KIND>` variable read by `parse`, by kind; a name that is no kind is a mistake. */
function perKind<T>(
  source: Record<string, string | undefined>,
  prefix: string,
  parse: (variable: string, value: string) => T,
  mistakes: string[],
): Partial<Record<string, T>> {
  const byKind: Partial<Record<string, T>> = {};
  for (const variable of Object.keys(source)
    .filter((k) => k.startsWith(prefix))
    .sort()) {
    const value = read(source, variable);
    if (value === undefined) continue;
    const kind = variable.slice(prefix.length).toLowerCase();
    if ((JOB_KINDS as readonly string[]).includes(kind)) byKind[kind] = parse(variable, value);
    else mistakes.push(`${variable}: no job kind "${kind}" (there are: ${JOB_KINDS.join(", ")})`);
  }
  return byKind;
}

/** A failover policy variable's value; a mistake (and `deadline`) when it is none of them. */
function policy(variable: string, value: string, mistakes: string[]): FailoverPolicy {
  if ((FAILOVER_POLICIES as readonly string[]).includes(value)) return value as FailoverPolicy;
  mistakes.push(
    `${variable}: "${value.slice(0, 40)}" is no failover policy (there are: ${FAILOVER_POLICIES.join(", ")})`,
  );
  return "deadline";
}

let cached: ModelRouting | undefined;

/** This process's providers and routes, parsed on first use. */
export function modelRouting(): ModelRouting {
  cached ??= parseModelRouting(process.env, env());
  return cached;
}

/** Forgets the parsed routing (tests that change the environment). */
export function resetModelRouting(): void {
  cached = undefined;
}

/**
 * The route of a job kind's model calls: its own, else the default — its first provider alone
 * when the kind's failover policy is `never`.
 */
export function routeFor(kind: string | undefined, routing: ModelRouting = modelRouting()): ModelProvider[] {
  const route = (kind === undefined ? undefined : routing.routes[kind]) ?? routing.defaultRoute;
  return failoverFor(kind, routing) === "never" ? route.slice(0, 1) : route;
}

/** A job kind's failover policy: its own, else the default. */
export function failoverFor(kind: string | undefined, routing: ModelRouting = modelRouting()): FailoverPolicy {
  return (kind === undefined ? undefined : routing.failover[kind]) ?? routing.defaultFailover;
}

/** The outside services of the model providers configured: `model`, then `model:<name>` for each other one. */
export function modelServices(routing: ModelRouting = modelRouting()): ModelService[] {
  return routing.providers.map((p) => p.service);
}

/** The variables that configure a model service's provider, for the words of its misconfiguration. */
export function providerVariables(service: ModelService): string {
  if (service === "model") return "MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME";
  const upper = service.slice("model:".length).toUpperCase();
  return `MODEL_${upper}_BASE_URL, MODEL_${upper}_API_KEY, MODEL_${upper}_NAME`;
}

/**
 * The providers a model service's calls go to while it is down: those after it on any kind's route
 * (under a policy that fails over), by name, in route order.
 */
export function fallbacksOf(service: string, routing: ModelRouting = modelRouting()): string[] {
  const names = routedKinds(routing).flatMap((kind) => {
    const route = routeFor(kind, routing);
    const at = route.findIndex((p) => p.service === service);
    return at < 0 ? [] : route.slice(at + 1).map((p) => p.name);
  });
  return [...new Set(names)];
}

/** Every provider some kind's calls may fail over to, by name. */
function fallbackNames(routing: ModelRouting): string[] {
  return [
    ...new Set(
      routedKinds(routing).flatMap((kind) =>
        routeFor(kind, routing)
          .slice(1)
          .map((p) => p.name),
      ),
    ),
  ];
}

/** The kinds whose route or policy is their own, and undefined for every other kind. */
function routedKinds(routing: ModelRouting): (string | undefined)[] {
  return [undefined, ...Object.keys(routing.routes), ...Object.keys(routing.failover)];
}

/** The provider of that name, if configured. */
export function providerOfName(name: string, routing: ModelRouting = modelRouting()): ModelProvider | undefined {
  return routing.providers.find((p) => p.name === name);
}

/** The provider configured to answer with `model` (the first, should two ask for the same), if any. */
export function providerOfModel(model: string, routing: ModelRouting = modelRouting()): ModelProvider | undefined {
  return routing.providers.find((p) => p.model === model);
}

/** The provider behind a model service (`model`, `model:backup`), if configured. */
export function providerOfService(service: string, routing: ModelRouting = modelRouting()): ModelProvider | undefined {
  return routing.providers.find((p) => p.service === service);
}

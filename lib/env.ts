import { z } from "zod";
import {
  BATCH_LANE_KINDS,
  BUDGET_VARIABLES,
  ITEMS_IN_FLIGHT_VARIABLES,
  QUEUE_NAMES,
  type BudgetVariable,
  type ItemsInFlightVariable,
  type QueueName,
} from "@/lib/catalog/catalog";

/**
 * The whole environment, parsed once. Beside it only the runtime's own flags are read directly:
 * `NEXT_RUNTIME` (lib/db/client.ts: is this the web process) and `NODE_ENV` (lib/security/csp.ts).
 * Every variable is listed with its default in `.env.example`.
 */

const positiveNumber = z.coerce.number().positive();
const seconds = z.coerce.number().positive().optional();
/** Days of history kept (lib/retention): at most 100 years, fractions allowed. */
const retentionDays = z.coerce.number().positive().max(36_500);

/**
 * `BOUNDED_BUDGET_<QUEUE>_SOFT_S` / `_HARD_S` for every queue of the catalog, and no others: an
 * override of a queue the catalog knows is always parsed, so it is never silently ignored.
 */
/** The items of a comma-separated variable, trimmed, empty ones left out. */
function commaList(text: string | undefined): string[] {
  return (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

const budgetOverrides = Object.fromEntries(BUDGET_VARIABLES.map((v) => [v, seconds])) as Record<
  BudgetVariable,
  typeof seconds
>;

/** `BOUNDED_ITEMS_IN_FLIGHT_<KIND>` for every kind of the catalog: how many of a job's items run at once. */
const inFlight = z.coerce.number().int().min(1).max(1024).optional();
const itemsInFlightOverrides = Object.fromEntries(ITEMS_IN_FLIGHT_VARIABLES.map((v) => [v, inFlight])) as Record<
  ItemsInFlightVariable,
  typeof inFlight
>;

/** The simulated outside services that `BOUNDED_SIM_SILENT` can silence (workers/simulators/faults.ts). */
export const SILENCEABLE_SIMULATORS = ["model", "backup-model", "ocr", "images", "marketplace"] as const;

const fields = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  DATABASE_URL: z
    .url({ protocol: /^postgres(ql)?$/, error: "must be a postgresql:// URL" })
    .default("postgresql://postgres@127.0.0.1:5432/bounded"),
  REDIS_URL: z.url({ protocol: /^rediss?$/, error: "must be a redis:// URL" }).default("redis://127.0.0.1:6379"),
  /**
   * Prefix of every Redis key Bounded writes (queues, limiter, heartbeats). Braces make a Redis
   * Cluster hash tag, required with BOUNDED_REDIS_CLUSTER=1 (see `hasHashTag`).
   */
  BOUNDED_REDIS_PREFIX: z
    .string()
    .regex(/^[a-zA-Z0-9:_{}-]+$/)
    .default("bounded"),
  /** 1: REDIS_URL names one node of a Redis Cluster, and the client discovers the others. */
  BOUNDED_REDIS_CLUSTER: z
    .enum(["0", "1"])
    .default("0")
    .transform((v) => v === "1"),
  PORT: z.coerce.number().int().min(1).max(65535).default(3000),
  /** Multiplies every duration the system uses. 1 in production; small in tests and demos. */
  BOUNDED_TIME_SCALE: positiveNumber.max(1000).default(1),
  /** Demo traffic with the whole system (`npm start`); a part started alone never runs it. */
  BOUNDED_DEMO: z
    .enum(["0", "1"])
    .default("1")
    .transform((v) => v === "1"),
  BOUNDED_ADMIN_PASSWORD: z.string().min(8, "must be at least 8 characters").optional(),
  BOUNDED_BOOTSTRAP_TOKEN: z.string().min(24, "must be at least 24 characters").optional(),
  /** Signs session cookies. When unset, a random secret is generated once and kept in the database. */
  BOUNDED_SESSION_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  /** Sets the Secure flag on the session cookie (serve over HTTPS when set). */
  BOUNDED_SECURE_COOKIES: z
    .enum(["0", "1"])
    .default("0")
    .transform((v) => v === "1"),
  /**
   * Proxies whose X-Forwarded-For is believed: addresses and CIDRs, comma-separated (e.g.
   * `10.0.0.0/8,::1`). Default none: the client is the socket peer.
   */
  BOUNDED_TRUSTED_PROXIES: z
    .string()
    .default("")
    .refine(
      (v) => v.split(",").every((p) => p.trim() === "" || /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(p.trim())),
      "must be IP addresses or CIDRs, comma-separated",
    ),
  /** Uploads (imports and document batches) one caller may start per minute. */
  BOUNDED_UPLOADS_PER_MINUTE: z.coerce.number().int().min(1).max(100_000).default(120),
  /** Uploads of one caller in flight at once, and the bytes they may declare together. */
  BOUNDED_UPLOADS_CONCURRENT: z.coerce.number().int().min(1).max(1000).default(2),
  BOUNDED_UPLOADS_INFLIGHT_MB: z.coerce.number().positive().max(100_000).default(60),
  /** Unset: the bundled simulators on BOUNDED_SIM_PORT (see `SIMULATOR_PATHS`). */
  MODEL_BASE_URL: z.url().optional(),
  MODEL_NAME: z.string().min(1).default("bounded-sim-1"),
  MODEL_API_KEY: z.string().optional(),
  /**
   * Model providers beyond the primary (`MODEL_BASE_URL`), comma-separated, the default route of
   * model calls through them, when a call fails over and what failover may cost; each provider's
   * own variables and each kind's route and policy are read by lib/model-providers.ts, which checks them all.
   */
  BOUNDED_MODEL_PROVIDERS: z.string().optional(),
  BOUNDED_MODEL_ROUTE: z.string().optional(),
  BOUNDED_MODEL_FAILOVER: z.enum(["never", "outage", "deadline"]).default("deadline"),
  /** What calls on fallbacks may cost, USD, per job and per tenant per UTC day (lib/modelcalls/failover-spend.ts). */
  BOUNDED_FAILOVER_MAX_USD_PER_JOB: z.string().optional(),
  BOUNDED_FAILOVER_MAX_USD_PER_TENANT_DAY: z.string().optional(),
  /**
   * USD per million tokens by model name, for the estimated cost of model calls (lib/modelcalls/usage.ts):
   * JSON `{"<model>": {"prompt": usd, "completion": usd, "batchPrompt": usd, "batchCompletion": usd}}`.
   * The batch prices are those of the provider's Batch API; left out, a batch token costs half a
   * sync one (OpenAI's published Batch API discount of 50 %). A model left out has no estimate. The
   * default prices the simulator's model like a small hosted model.
   */
  BOUNDED_MODEL_PRICES: z
    .string()
    .default('{"bounded-sim-1":{"prompt":0.15,"completion":0.6}}')
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({
          code: "custom",
          message:
            'must be JSON like {"<model>": {"prompt": 0.15, "completion": 0.6, "batchPrompt": 0.075, "batchCompletion": 0.3}} (USD per million tokens; the batch prices optional)',
        });
        return z.NEVER;
      }
    })
    .pipe(
      z.record(
        z.string().min(1),
        z.strictObject({
          prompt: z.number().min(0),
          completion: z.number().min(0),
          batchPrompt: z.number().min(0).optional(),
          batchCompletion: z.number().min(0).optional(),
        }),
      ),
    ),
  /**
   * Days a tenant's stored category answer is reused (lib/answers/store.ts) before it is asked
   * again; an expired answer is a miss. Applies to answers written from then on.
   */
  BOUNDED_CATEGORY_ANSWER_TTL_DAYS: z.coerce.number().positive().max(3650).default(90),
  /**
   * How long each class of history is kept, in days (fractions allowed: a test keeps seconds),
   * real time whatever the time scale; lib/retention/policy.ts says what each class holds. A job
   * that still waits on a person is never pruned.
   */
  BOUNDED_RETAIN_JOB_DETAIL_DAYS: retentionDays.default(90),
  BOUNDED_RETAIN_JOBS_DAYS: retentionDays.default(400),
  BOUNDED_RETAIN_MODEL_CALLS_DAYS: retentionDays.default(30),
  BOUNDED_RETAIN_WEBHOOK_DELIVERIES_DAYS: retentionDays.default(30),
  BOUNDED_RETAIN_ROLLUPS_DAYS: retentionDays.default(400),
  BOUNDED_RETAIN_QUOTA_RECORDS_DAYS: retentionDays.default(400),
  BOUNDED_RETAIN_AUDIT_DAYS: retentionDays.default(730),
  /** Real seconds between two retention passes (lib/retention, run by whichever worker holds the lease): the days are real time, so is this. */
  BOUNDED_RETENTION_EVERY_S: z.coerce.number().positive().max(86_400).default(600),
  /** After each batch, the retention pass rests this many times as long as the batch took (lib/retention/pass.ts). */
  BOUNDED_RETENTION_REST_FACTOR: z.coerce.number().min(0).max(100).default(12),
  /**
   * A tenant's deletion (lib/actions/tenant-deletion.ts) goes this many jobs per batch and this many
   * rows per statement: each statement a short transaction, whatever the tenant's size. 500, as
   * the retention pass's batches: a few tens of ms per statement on the tables' indexes.
   */
  BOUNDED_TENANT_DELETION_BATCH: z.coerce.number().int().min(1).max(10_000).default(500),
  /** Real seconds between two passes that go on with started tenant deletions (whichever worker holds the lease). */
  BOUNDED_TENANT_DELETION_EVERY_S: z.coerce.number().positive().max(3_600).default(30),
  /**
   * `0`: every row of an import asks the model, as if no earlier row or file had asked its question
   * (nothing shared within a job, nothing stored or read): the baseline of `npm run bench:cost`, or
   * to rule reuse out while looking into a category. `1` (default): asked once per question.
   */
  BOUNDED_CATEGORY_ANSWER_REUSE: z
    .enum(["0", "1"])
    .default("1")
    .transform((v) => v === "1"),
  /** Where OCR requests go (POST {OCR_BASE_URL}/ocr). Unset: the bundled simulators on BOUNDED_SIM_PORT. */
  OCR_BASE_URL: z.url().optional(),
  /** Unset: the bundled simulators on BOUNDED_SIM_PORT. */
  MARKETPLACE_BASE_URL: z.url().optional(),
  /** Unset: the bundled simulators on BOUNDED_SIM_PORT. */
  IMAGE_PROVIDER_BASE_URL: z.url().optional(),
  /** Port of the bundled simulators of the outside services. */
  BOUNDED_SIM_PORT: z.coerce.number().int().min(1).max(65535).default(4010),
  /** Address the bundled simulators listen on: loopback for this machine's workers; 0.0.0.0 in a container the workers reach over a network. */
  BOUNDED_SIM_HOST: z.string().min(1).default("127.0.0.1"),
  /** Share of simulated model calls that answer 500 (0–1). */
  BOUNDED_SIM_MODEL_ERROR_RATE: z.coerce.number().min(0).max(1).default(0.01),
  /** Share of simulated OCR calls that answer 500 (0–1). */
  BOUNDED_SIM_OCR_ERROR_RATE: z.coerce.number().min(0).max(1).default(0.01),
  /**
   * The key the model simulator requires as `Authorization: Bearer <key>` (401 with OpenAI's body
   * otherwise). Unset: it takes any key or none.
   */
  BOUNDED_SIM_API_KEY: z.string().min(1).optional(),
  /**
   * The model names the simulator serves, comma-separated; any other answers 404 `model_not_found`.
   * Unset: `MODEL_NAME` alone, so the simulator serves whatever the workers are configured to ask for.
   */
  BOUNDED_SIM_MODELS: z.string().optional().transform(commaList),
  /**
   * The simulated model's context length in tokens (prompt plus the completion asked for); a
   * request over it answers 400 `context_length_exceeded`. 128k, as today's hosted models: far above
   * the product's largest request (a batch of 8 rows with the category list, a few thousand tokens).
   */
  BOUNDED_SIM_MODEL_CONTEXT_TOKENS: z.coerce.number().int().min(16).max(10_000_000).default(128_000),
  /**
   * The simulators' second model provider (`/backup/v1`): another OpenAI-compatible endpoint with
   * its own model names, key, failures and limits, frozen, slowed, failed, rate-limited or
   * misconfigured on its own (`POST /_control/backup-model`). Its model names, comma-separated.
   */
  BOUNDED_SIM_BACKUP_MODELS: z
    .string()
    .default("bounded-sim-backup-1")
    .transform(commaList)
    .pipe(z.array(z.string()).min(1, "must name at least one model")),
  /** The key the second model provider requires (401 otherwise). Unset: any or none. */
  BOUNDED_SIM_BACKUP_MODEL_API_KEY: z.string().min(1).optional(),
  /** Share of the second model provider's calls that answer 500 (0–1). */
  BOUNDED_SIM_BACKUP_MODEL_ERROR_RATE: z.coerce.number().min(0).max(1).default(0.01),
  /**
   * The second model provider's limits, beyond which it answers 429 with Retry-After: smaller than
   * the first's (a fallback contract is usually a smaller one).
   */
  BOUNDED_SIM_BACKUP_MODEL_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(8),
  BOUNDED_SIM_BACKUP_MODEL_RPS: z.coerce.number().positive().max(100_000).default(5),
  BOUNDED_SIM_BACKUP_MODEL_TPM: z.coerce.number().int().min(1).max(1_000_000_000).default(2_000_000),
  /**
   * Simulated services that accept calls and answer nothing from the start, comma-separated
   * (model, backup-model, ocr, images, marketplace): a provider that hangs. Switched at run time with
   * `POST /_control/<service> {"silent": true|false}` on the simulators (workers/simulators/faults.ts).
   */
  BOUNDED_SIM_SILENT: z
    .string()
    .default("")
    .transform(commaList)
    .pipe(
      z.array(
        z.enum(SILENCEABLE_SIMULATORS, {
          error: `must name services among ${SILENCEABLE_SIMULATORS.join(", ")}, comma-separated`,
        }),
      ),
    ),
  /**
   * The model provider's limits, shared by every worker process (lib/ratelimit/provider.ts): calls
   * in flight at once, and requests per production second. 32 in flight is what an
   * OpenAI-compatible deployment of this size serves before its queue latency grows; 30 requests
   * a second (~1,800 a minute) is its request quota, with room under it for the bursts of
   * concurrent items (~100k calls a month average well under 1 a second).
   */
  BOUNDED_PROVIDER_MODEL_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(32),
  BOUNDED_PROVIDER_MODEL_RPS: z.coerce.number().positive().max(100_000).default(30),
  /**
   * The model provider's tokens per production minute (prompt + completion), shared by every worker
   * process. Unset: learnt from the provider's own `x-ratelimit-*` headers (lib/ratelimit/provider-tokens.ts).
   * `_INPUT_TPM` / `_OUTPUT_TPM` for a provider that limits input and output tokens apart (Anthropic).
   */
  BOUNDED_MODEL_TPM: z.coerce.number().int().min(1).max(1_000_000_000).optional(),
  BOUNDED_MODEL_INPUT_TPM: z.coerce.number().int().min(1).max(1_000_000_000).optional(),
  BOUNDED_MODEL_OUTPUT_TPM: z.coerce.number().int().min(1).max(1_000_000_000).optional(),
  /**
   * The OCR service's limits: fewer calls in flight than the model (an OCR call holds a whole
   * document, up to 10 MiB, in the service's memory) and 20 requests per production second, its
   * quota; a 95-document batch still starts in under 5 s.
   */
  BOUNDED_PROVIDER_OCR_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(16),
  BOUNDED_PROVIDER_OCR_RPS: z.coerce.number().positive().max(100_000).default(20),
  /**
   * The model simulator's own limits, beyond which it answers 429 with Retry-After. The same as
   * the provider limits by default, so Bounded's limiter keeps it at no 429 at all; lower them to
   * watch what a provider that is stricter than configured does.
   */
  BOUNDED_SIM_MODEL_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(32),
  BOUNDED_SIM_MODEL_RPS: z.coerce.number().positive().max(100_000).default(30),
  /**
   * The model simulator's tokens per production minute (prompt + completion, as its `usage`
   * reports them), beyond which it answers 429. 10 million (a top-tier hosted model's quota): the
   * demo's traffic, ~30 calls a second at most, stays far below it.
   */
  BOUNDED_SIM_MODEL_TPM: z.coerce.number().int().min(1).max(1_000_000_000).default(10_000_000),
  /** The OCR simulator's own limits, as for the model simulator: the provider defaults. */
  BOUNDED_SIM_OCR_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(16),
  BOUNDED_SIM_OCR_RPS: z.coerce.number().positive().max(100_000).default(20),
  BOUNDED_UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(10 * 1024 * 1024),
  /** Largest document of a bulk_ocr batch, and the whole batch, in bytes. */
  BOUNDED_DOCUMENT_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(10 * 1024 * 1024),
  BOUNDED_DOCUMENT_BATCH_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(50 * 1024 * 1024),
  BOUNDED_UPLOAD_MAX_ROWS: z.coerce.number().int().positive().default(50_000),
  /**
   * Whether a job projected not to fit its budget splits itself into parts at its start, and a run
   * slower than projected hands its rest to a new attempt before its deadline (see
   * lib/projection/projection.ts). Off, it runs whole and times out with the items it reached, to be
   * retried or split by an operator.
   */
  BOUNDED_AUTO_SPLIT: z
    .enum(["0", "1"])
    .default("1")
    .transform((v) => v === "1"),
  /**
   * The kinds that may use the provider's Batch API when a job's budget leaves room
   * (lib/runs/batch-lane.ts), comma-separated; only kinds the catalog allows it (`batchLane`).
   * Unset (or empty, like every variable here): every such kind; `none`: no kind (every job runs
   * on direct calls).
   */
  BOUNDED_BATCH_LANE_KINDS: z
    .string()
    .default(BATCH_LANE_KINDS.join(","))
    .transform((text, ctx) => {
      if (text.trim().toLowerCase() === "none") return [];
      const kinds = [...new Set(commaList(text))];
      const refused = kinds.filter((k) => !(BATCH_LANE_KINDS as readonly string[]).includes(k));
      if (refused.length > 0) {
        ctx.addIssue({
          code: "custom",
          message: `not a kind the catalog lets use the batch lane: ${refused.join(", ")} (allowed: ${BATCH_LANE_KINDS.join(", ") || "none"})`,
        });
        return z.NEVER;
      }
      return kinds;
    }),
  /**
   * The queues this worker process consumes, comma-separated (e.g. `imports,documents`, to give
   * big imports a pool of their own). Unset: every queue of the catalog.
   */
  BOUNDED_WORKER_QUEUES: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return [...QUEUE_NAMES];
      const names = [...new Set(commaList(text))];
      const unknown = names.filter((q) => !(QUEUE_NAMES as string[]).includes(q));
      if (unknown.length > 0 || names.length === 0) {
        ctx.addIssue({
          code: "custom",
          message: `${unknown.length > 0 ? `unknown queue${unknown.length === 1 ? "" : "s"} ${unknown.map((q) => JSON.stringify(q)).join(", ")}` : "names no queue"}; the queues are ${QUEUE_NAMES.join(", ")}`,
        });
        return z.NEVER;
      }
      return names as QueueName[];
    }),
  /** Jobs one worker process runs at once, per queue. */
  BOUNDED_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  /**
   * The worker process's JavaScript heap, in MB (`node --max-old-space-size`, set by
   * scripts/start.ts): V8 collects before it grows past it, so the process's memory stays within
   * it and what Node keeps outside the heap (about 220 MB), however long the files it imports.
   * What the process really holds is about 80 MB and 15 MB more for each import running at once
   * (docs/capacity.md): raise it with BOUNDED_WORKER_CONCURRENCY.
   */
  BOUNDED_WORKER_HEAP_MB: z.coerce.number().int().min(128).max(65_536).default(256),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Where OpenTelemetry spans go (OTLP over HTTP, e.g. http://collector:4318). Unset: no tracing SDK is started. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/, error: "must be an http(s):// URL" }).optional(),
  /** The `service.name` of exported spans. */
  OTEL_SERVICE_NAME: z.string().min(1).default("bounded"),
  ...budgetOverrides,
  ...itemsInFlightOverrides,
  /** How old a silent quota reserve must be before the sweeper takes it back. Unset: lib/catalog/generation-policy.ts (25 min). */
  BOUNDED_RESERVE_SWEEP_WINDOW_S: seconds,
});

/**
 * Redis Cluster runs a multi-key command, a MULTI or a Lua script only when all its keys hash to
 * one slot. BullMQ touches many keys of a queue in one script, and Bounded reads several of its
 * own keys at once (MGET of snapshots, the login counters in one MULTI), so every key goes in one
 * slot: the slot of the prefix's hash tag. Redis hashes only the text between the first `{` and
 * the first `}` after it, when that text is not empty; as every key starts with the prefix, the
 * prefix alone decides.
 */
export function hasHashTag(prefix: string): boolean {
  const open = prefix.indexOf("{");
  return open >= 0 && prefix.indexOf("}", open + 1) > open + 1;
}

/**
 * Where each outside service lives on the bundled simulators, below `http://127.0.0.1:<BOUNDED_SIM_PORT>`.
 * A base URL variable left unset follows `BOUNDED_SIM_PORT`, so moving the simulators moves every
 * default with them.
 */
export const SIMULATOR_PATHS = {
  // With /v1, as the official SDK's base URL has it: requests go to {MODEL_BASE_URL}/chat/completions.
  MODEL_BASE_URL: "/v1",
  /** The second simulated model provider (`MODEL_<NAME>_BASE_URL` of a provider in `BOUNDED_MODEL_PROVIDERS`). */
  BACKUP_MODEL_BASE_URL: "/backup/v1",
  MARKETPLACE_BASE_URL: "/marketplace",
  IMAGE_PROVIDER_BASE_URL: "/images",
} as const;

/** The bundled simulators' base URL of one service on `port`. */
export function simulatorUrl(port: number, service: keyof typeof SIMULATOR_PATHS): string {
  return `http://127.0.0.1:${port}${SIMULATOR_PATHS[service]}`;
}

const refined = fields.superRefine((e, ctx) => {
  if (!e.BOUNDED_REDIS_CLUSTER) return;
  if (!hasHashTag(e.BOUNDED_REDIS_PREFIX)) {
    ctx.addIssue({
      code: "custom",
      path: ["BOUNDED_REDIS_PREFIX"],
      message:
        "with BOUNDED_REDIS_CLUSTER=1 the prefix must contain a hash tag, e.g. {bounded}: BullMQ needs all keys of a queue in one cluster slot, and Bounded keeps all its keys in the slot of that tag",
    });
  }
  if (!/^\/?0?$/.test(new URL(e.REDIS_URL).pathname)) {
    ctx.addIssue({
      code: "custom",
      path: ["REDIS_URL"],
      message: "with BOUNDED_REDIS_CLUSTER=1 it must name database 0 or none: Redis Cluster has only database 0",
    });
  }
});

const schema = refined.transform((e) => ({
  ...e,
  MODEL_BASE_URL: e.MODEL_BASE_URL ?? simulatorUrl(e.BOUNDED_SIM_PORT, "MODEL_BASE_URL"),
  MARKETPLACE_BASE_URL: e.MARKETPLACE_BASE_URL ?? simulatorUrl(e.BOUNDED_SIM_PORT, "MARKETPLACE_BASE_URL"),
  IMAGE_PROVIDER_BASE_URL: e.IMAGE_PROVIDER_BASE_URL ?? simulatorUrl(e.BOUNDED_SIM_PORT, "IMAGE_PROVIDER_BASE_URL"),
  BOUNDED_SIM_MODELS: e.BOUNDED_SIM_MODELS.length > 0 ? e.BOUNDED_SIM_MODELS : [e.MODEL_NAME],
}));

/** The budget overrides are typed by name pattern (zod's inference keeps only literal keys). */
export type Env = z.infer<typeof schema> & Partial<Record<BudgetVariable | ItemsInFlightVariable, number>>;

/** Every variable the project reads (for `.env.example` and documentation checks). */
export const ENV_VARIABLES = Object.keys(fields.shape) as (keyof Env)[];

export class EnvError extends Error {
  override name = "EnvError";
}

/** Parses an environment; throws an `EnvError` whose message names the first bad variable. */
export function parseEnv(source: Record<string, string | undefined>): Env {
  // An empty value means "use the default", as in most .env tooling.
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = String(issue.path[0] ?? "environment");
    throw new EnvError(
      `${name}: ${issue.message}${shown(name, source[name])}. Fix ${name} in the environment or .env, see .env.example.`,
    );
  }
  return result.data;
}

const SECRETS = /PASSWORD|TOKEN|SECRET|KEY/;

/** The rejected value, unless it is a secret; credentials in URLs are masked. */
function shown(name: string, value: string | undefined): string {
  if (value === undefined || SECRETS.test(name)) return "";
  return ` (got ${JSON.stringify(value.replace(/\/\/[^@/]*@/, "//***@").slice(0, 80))})`;
}

let cached: Env | undefined;

/** The process environment, parsed on first use. */
export function env(): Env {
  cached ??= parseEnv(process.env);
  return cached;
}

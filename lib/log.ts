import { AsyncLocalStorage } from "node:async_hooks";
import pino from "pino";
import { env } from "@/lib/env";

export type Logger = pino.Logger;

/**
 * Field names whose values never reach a log line, wherever they appear in the logged object
 * (request headers, parsed bodies, error details). Compared by exact name.
 */
const SECRET_FIELDS = [
  "password",
  "passwordHash",
  "token",
  "accessToken",
  "refreshToken",
  "apiKey",
  "api_key",
  "secret",
  "authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
];

/**
 * pino's redaction matches paths of a fixed depth (`*` is one level), so "at any depth" is
 * spelled out up to this many levels below the logged object — enough for `{ req: { headers } }`
 * and `{ err: { config: { headers } } }` shapes.
 */
const REDACT_DEPTH = 4;

function redactPaths(): string[] {
  const paths: string[] = [];
  for (const field of SECRET_FIELDS) {
    const plain = /^[A-Za-z_$][\w$]*$/.test(field);
    for (let depth = 0; depth < REDACT_DEPTH; depth++) {
      const prefix = Array.from({ length: depth }, () => "*").join(".");
      if (plain) paths.push(prefix ? `${prefix}.${field}` : field);
      else paths.push(`${prefix}["${field}"]`);
    }
  }
  return paths;
}

/** Fields every line written inside `withLogFields` carries, whichever module's logger writes it. */
const fieldsInScope = new AsyncLocalStorage<Record<string, unknown>>();

/**
 * Runs `fn` with `fields` on every log line written inside it (and in everything it awaits), by
 * any logger: a job's tenant on the lines of the model client, the limiter, the quota code. A
 * logger that bound the field itself (a job's own child logger) writes it once, not twice.
 */
export function withLogFields<T>(fields: Record<string, unknown>, fn: () => T): T {
  return fieldsInScope.run({ ...fieldsInScope.getStore(), ...fields }, fn);
}

function scopedFields(_merge: object, _level: number, log: Logger): object {
  const fields = fieldsInScope.getStore();
  if (!fields) return {};
  const bound = (log as unknown as Record<symbol, string | undefined>)[pino.symbols.chindingsSym] ?? "";
  const added: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields))
    if (value !== undefined && !bound.includes(`"${name}":`)) added[name] = value;
  return added;
}

let base: Logger | undefined;

/** The process's root logger: JSON lines on stdout, level from `LOG_LEVEL`, secrets redacted. */
function baseLogger(): Logger {
  base ??= pino({
    level: env().LOG_LEVEL,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // "level":"warn" reads better than "level":40 when someone greps the raw lines.
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: redactPaths(), censor: "[redacted]" },
    mixin: scopedFields,
  });
  return base;
}

/** A logger whose lines carry `"name": name` (the module or process that wrote them). */
export function logger(name: string): Logger {
  return baseLogger().child({ name });
}

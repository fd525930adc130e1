/**
 * "PostgreSQL or Redis is not reachable right now" — told apart, in one place, from every other
 * error. It is neither an item's failure nor a job's: a job waits for the dependency and goes on
 * (./pause.ts), and a web request answers 503 at once with a time to come back.
 *
 * Only errors that PostgreSQL's and Redis's clients raise are recognised: a refused connection to
 * an outside HTTP service (a model endpoint, a marketplace) is that service's business and keeps
 * its own rules.
 */
import { env } from "@/lib/env";

export type Dependency = "database" | "redis";

/** A dependency did not answer. `cause` is the client's own error, kept for the log. */
export class DependencyUnavailable extends Error {
  override name = "DependencyUnavailable";
  constructor(
    readonly dependency: Dependency,
    options?: { cause?: unknown },
  ) {
    super(unavailableMessage(dependency), options);
  }
}

/** What a person reads while a dependency is down. */
export function unavailableMessage(dependency: Dependency): string {
  return dependency === "database"
    ? "The database is not reachable right now; try again in a minute."
    : "The queue service (Redis) is not reachable right now; try again in a minute.";
}

/** Seconds a client is told to wait before trying again (the `Retry-After` of a 503). */
export const RETRY_AFTER_SECONDS = 30;

/**
 * Prisma's codes for "the server could not be reached or went away": can't reach (P1001), timed
 * out (P1002, P1008), closed the connection (P1017), connection pool timeout (P2024), too many
 * connections (P2037).
 */
const PRISMA_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2037"]);
/**
 * P2028 is any error of the transaction API; only this one says no connection could be had in
 * time (the pool exhausted or the server not answering), as P2024 does outside a transaction.
 */
const PRISMA_NO_TRANSACTION = /Unable to start a transaction in the given time/;
/** Driver adapter error kinds with the same meaning. */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
/**
 * SQLSTATEs of a server that is stopping or not accepting connections: class 08 (connection
 * exception), 57P01–57P03 (shut down by the administrator, crashed, cannot connect now), 53300
 * (too many connections).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;
/** node-postgres's own messages for a connection that failed, timed out or was cut. */
const PG_MESSAGES = [
  "Connection terminated",
  "timeout exceeded when trying to connect",
  "Query read timeout",
  "Client has encountered a connection error and is not queryable",
  "Client was closed and is not queryable",
  "Cannot use a pool after calling end on the pool",
];
/** ioredis's errors for a connection that is down or a command that got no answer in time. */
const REDIS_NAMES = new Set(["MaxRetriesPerRequestError", "ClusterAllFailedError"]);
const REDIS_MESSAGES = [
  "Command timed out",
  "Connection is closed.",
  "Stream isn't writeable",
  "Failed to refresh slots cache",
  "None of startup nodes is available",
  "LOADING Redis is loading the dataset in memory",
];
const NET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  port?: unknown;
  cause?: unknown;
  meta?: { driverAdapterError?: { cause?: AdapterCause } };
}

interface AdapterCause {
  kind?: unknown;
  originalCode?: unknown;
}

function portsOf(): { database: number; redis: number } | null {
  try {
    const e = env();
    return { database: Number(new URL(e.DATABASE_URL).port || 5432), redis: Number(new URL(e.REDIS_URL).port || 6379) };
  } catch {
    return null;
  }
}

/**
 * Which dependency an error says is unreachable, or null when it is any other error (a bad
 * query, a constraint, a timeout of an outside service). A `DependencyUnavailable` says itself.
 */
export function unavailableDependency(err: unknown): Dependency | null {
  if (err instanceof DependencyUnavailable) return err.dependency;
  if (typeof err !== "object" || err === null) return null;
  const e = err as ErrorLike;
  const name = typeof e.name === "string" ? e.name : "";
  const message = typeof e.message === "string" ? e.message : "";
  const code = typeof e.code === "string" ? e.code : "";
  // The class from another copy of this module (a worker thread, a bundled chunk).
  if (name === "DependencyUnavailable")
    return (err as { dependency?: unknown }).dependency === "redis" ? "redis" : "database";
  if (name === "PrismaClientInitializationError") return "database";
  if (name.startsWith("PrismaClient") && PRISMA_CODES.has(code)) return "database";
  if (name.startsWith("PrismaClient") && code === "P2028" && PRISMA_NO_TRANSACTION.test(message)) return "database";
  // The driver adapter's error, inside Prisma's (`meta`) or on its own: a statement of an
  // interactive transaction whose connection is cut throws it unwrapped.
  const adapter =
    e.meta?.driverAdapterError?.cause ??
    (name === "DriverAdapterError" && typeof e.cause === "object" ? (e.cause as AdapterCause | null) : undefined);
  if (
    adapter &&
    (ADAPTER_KINDS.has(String(adapter.kind)) || UNAVAILABLE_SQLSTATE.test(String(adapter.originalCode ?? "")))
  )
    return "database";
  if (UNAVAILABLE_SQLSTATE.test(code) && "severity" in e) return "database";
  if (PG_MESSAGES.some((m) => message.startsWith(m))) return "database";
  if (REDIS_NAMES.has(name) || REDIS_MESSAGES.some((m) => message.startsWith(m))) return "redis";
  // A bare socket error: only a connection to the database's or Redis's port is theirs.
  if (NET_CODES.has(code) && typeof e.port === "number") {
    const ports = portsOf();
    if (ports?.database === e.port) return "database";
    if (ports?.redis === e.port) return "redis";
  }
  return null;
}

export function isDependencyUnavailable(err: unknown): boolean {
  return unavailableDependency(err) !== null;
}

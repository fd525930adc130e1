import pg from "pg";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { requestRebuild } from "./snapshot";

const log = logger("progress");

/** The channel the database announces progress tokens on (prisma/migrations/…_progress_notifications). */
export const PROGRESS_CHANNEL = "bounded_progress_changed";
const RECONNECT_MS = 1_000;

const state = globalThis as unknown as { __boundedProgressListener?: Promise<() => Promise<void>> };

/**
 * LISTENs on a connection of its own and turns every announced token into a rebuild of that job's
 * answer (./snapshot.ts). A lost connection reconnects after a second; what was announced while it
 * was down reaches the watchers when a read finds the answer stale (`STALE_AFTER_MS`).
 */
async function listen(): Promise<() => Promise<void>> {
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let client: pg.Client | undefined;
  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: env().DATABASE_URL });
    next.on("notification", (msg) => {
      if (msg.channel === PROGRESS_CHANNEL && msg.payload) {
        requestRebuild(msg.payload).catch((err: unknown) =>
          log.warn({ err: err instanceof Error ? err.message : String(err) }, "progress rebuild failed"),
        );
      }
    });
    next.on("error", (err) => {
      log.warn({ err: err.message }, "progress listener lost its connection; reconnecting");
      void next.end().catch(() => undefined);
      scheduleReconnect();
    });
    await next.connect();
    await next.query(`LISTEN ${PROGRESS_CHANNEL}`);
    client = next;
  };
  const scheduleReconnect = () => {
    clearTimeout(retry);
    if (!stopped) retry = setTimeout(() => void connect().catch(scheduleReconnect), RECONNECT_MS);
  };
  await connect().catch((err: unknown) => {
    log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      "progress listener could not connect; retrying",
    );
    scheduleReconnect();
  });
  return async () => {
    stopped = true;
    clearTimeout(retry);
    await client?.end().catch(() => undefined);
  };
}

/**
 * Starts this process's listener once (the first progress read or stream starts it); resolves
 * when it listens or has scheduled its reconnect. Returns the function that stops it.
 */
export function ensureProgressListener(): Promise<() => Promise<void>> {
  state.__boundedProgressListener ??= listen();
  return state.__boundedProgressListener;
}

/** Stops this process's listener (shutdown, tests). */
export async function stopProgressListener(): Promise<void> {
  const started = state.__boundedProgressListener;
  state.__boundedProgressListener = undefined;
  if (started !== undefined) await (await started)();
}

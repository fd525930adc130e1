import { UnrecoverableError, type Queue } from "bullmq";
import type { WebhookDeliveryStatus } from "@/generated/prisma/enums";
import { db } from "@/lib/db/client";
import type { JobStatus } from "@/lib/core/job-statuses";
import { attemptRequest, describeFailure, type SendRequest } from "@/lib/http/outbound";
import type { Logger } from "@/lib/log";
import { retryDelayMs, type DeliverySettings } from "./policy";
import { enqueueDelivery, type DeliveryJobData } from "./queue";
import { DELIVERY_HEADER, SIGNATURE_HEADER, signatureHeader } from "./signature";

/**
 * Sending the outbox: the relay moves pending WebhookDelivery rows (written by the database in
 * the transaction that ended the job) to the `webhooks` queue, and `deliver` makes one signed
 * POST per queue attempt and records what happened on the row, which the job page shows.
 */

/** What a delivery announces: the job's summary. Never a secret, the progress token or params. */
export interface WebhookPayload {
  id: string;
  kind: string;
  tenant: string;
  status: JobStatus;
  total: number | null;
  processed: number;
  failed: number;
  message: string | null;
  finishedAt: string;
}

/** The body as sent, its keys in this order (the row's JSONB keeps its own order). */
export function bodyOf(p: WebhookPayload): string {
  const { id, kind, tenant, status, total, processed, failed, message, finishedAt } = p;
  return JSON.stringify({ id, kind, tenant, status, total, processed, failed, message, finishedAt });
}

/**
 * Queues the deliveries not queued yet, and those queued long ago (`requeueAfterMs`) that are
 * still pending: their queue job may have been lost with Redis; a live one is not duplicated
 * (same id), a finished one that left the row pending is replaced. Returns how many it queued.
 */
export async function relayDeliveries(q: Queue<DeliveryJobData>, settings: DeliverySettings): Promise<number> {
  const rows = await db().$queryRaw<{ id: string; queued: boolean }[]>`
    SELECT id::text AS id, "queuedAt" IS NOT NULL AS queued FROM "WebhookDelivery"
    WHERE status = 'pending' AND ("queuedAt" IS NULL OR "queuedAt" < (now() AT TIME ZONE 'UTC') - make_interval(secs => ${settings.requeueAfterMs / 1000}::float8))
    ORDER BY "createdAt" LIMIT 500`;
  for (const row of rows) {
    if (row.queued) {
      const previous = await q.getJob(row.id);
      const state = previous ? await previous.getState() : "unknown";
      if (previous && (state === "completed" || state === "failed")) await previous.remove();
    }
    await enqueueDelivery(q, row.id, settings);
  }
  if (rows.length > 0) {
    await db()
      .$executeRaw`UPDATE "WebhookDelivery" SET "queuedAt" = now() AT TIME ZONE 'UTC' WHERE id = ANY(${rows.map((r) => r.id)}::uuid[])`;
  }
  return rows.length;
}

export interface DeliverOptions {
  settings: DeliverySettings;
  /** Attempts BullMQ already made of this queue job (for the time of the next one). */
  attemptsMade: number;
  log: Logger;
  /** @defaultValue the project's outbound HTTP */
  send?: SendRequest;
  /** @defaultValue Date.now() */
  now?: () => number;
}

export interface DeliverResult {
  type: "delivered" | "skipped" | "gave_up";
  status?: number;
}

/**
 * One attempt of one delivery: signs the body with the endpoint's secret at this moment, posts it
 * with the delivery id, records the attempt. A 2xx is delivered. Anything else throws, so BullMQ
 * retries after its backoff, unless that was the last attempt: then the row is `failed` and the
 * error is unrecoverable. The secret never reaches a log line or the row.
 */
export async function deliver(
  deliveryId: string,
  { settings, attemptsMade, log, send, now = Date.now }: DeliverOptions,
): Promise<DeliverResult> {
  const d = await db().webhookDelivery.findUnique({
    where: { id: deliveryId },
    select: {
      status: true,
      attempts: true,
      payload: true,
      jobId: true,
      endpoint: { select: { url: true, secret: true } },
    },
  });
  if (d?.status !== "pending") return { type: "skipped" };
  if (!d.endpoint) {
    await record(deliveryId, {
      status: "failed",
      lastError: "the tenant's webhook endpoint was removed",
      nextAttemptAt: null,
      counted: false,
    });
    return { type: "gave_up" };
  }
  const { url, secret } = d.endpoint;
  const body = bodyOf(d.payload as unknown as WebhookPayload);
  const t = Math.floor(now() / 1000);
  const attempt = await attemptRequest(
    {
      method: "POST",
      url: new URL(url),
      headers: {
        "content-type": "application/json",
        "user-agent": "Bounded-Webhooks/1",
        [SIGNATURE_HEADER]: signatureHeader(secret, body, t),
        [DELIVERY_HEADER]: deliveryId,
      },
      body,
      timeoutMs: settings.timeoutMs,
    },
    send,
  );
  const number = d.attempts + 1;
  const fields = { url, log: log.child({ deliveryId, jobId: d.jobId, url, attempt: number }) };
  if (attempt.ok) {
    await record(deliveryId, {
      status: "delivered",
      lastStatusCode: attempt.response.status,
      lastError: null,
      nextAttemptAt: null,
      deliveredAt: new Date(now()),
      url,
    });
    fields.log.info({ status: attempt.response.status }, "webhook delivered");
    return { type: "delivered", status: attempt.response.status };
  }
  const statusCode = "status" in attempt ? attempt.status : null;
  const error = attempt.kind === "aborted" ? "aborted" : describeFailure("the receiver", attempt).slice(0, 500);
  const last = number >= settings.attempts;
  const nextAttemptAt = last ? null : new Date(now() + retryDelayMs(attemptsMade + 1, settings.backoffMs));
  await record(deliveryId, {
    status: last ? "failed" : "pending",
    lastStatusCode: statusCode,
    lastError: error,
    nextAttemptAt,
    url,
  });
  fields.log.warn(
    { status: statusCode, error, last },
    last ? "webhook delivery failed for good" : "webhook delivery failed; it will be retried",
  );
  if (last) throw new UnrecoverableError(error);
  throw new Error(error);
}

async function record(
  id: string,
  f: {
    status: WebhookDeliveryStatus;
    lastStatusCode?: number | null;
    lastError: string | null;
    nextAttemptAt: Date | null;
    deliveredAt?: Date;
    url?: string;
    counted?: boolean;
  },
): Promise<void> {
  await db().webhookDelivery.updateMany({
    where: { id, status: "pending" },
    data: {
      status: f.status,
      ...(f.counted === false ? {} : { attempts: { increment: 1 } }),
      ...(f.lastStatusCode !== undefined ? { lastStatusCode: f.lastStatusCode } : {}),
      lastError: f.lastError,
      nextAttemptAt: f.nextAttemptAt,
      ...(f.deliveredAt ? { deliveredAt: f.deliveredAt } : {}),
      ...(f.url ? { url: f.url } : {}),
    },
  });
}

export interface DeliveryView {
  id: string;
  url: string;
  jobStatus: JobStatus;
  status: WebhookDeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  createdAt: Date;
}

/** A job's deliveries, oldest first (the job page). */
export function deliveriesOfJob(jobId: string): Promise<DeliveryView[]> {
  return db().webhookDelivery.findMany({
    where: { jobId },
    orderBy: { createdAt: "asc" },
    take: 50,
    select: {
      id: true,
      url: true,
      jobStatus: true,
      status: true,
      attempts: true,
      lastStatusCode: true,
      lastError: true,
      nextAttemptAt: true,
      deliveredAt: true,
      createdAt: true,
    },
  });
}

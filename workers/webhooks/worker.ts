import { Worker } from "bullmq";
import { env } from "@/lib/env";
import type { SendRequest } from "@/lib/http/outbound";
import type { Logger } from "@/lib/log";
import type { RedisClient } from "@/lib/redis/client";
import { deliver, relayDeliveries } from "@/lib/webhooks/deliveries";
import { deliverySettings, type DeliverySettings } from "@/lib/webhooks/policy";
import { WEBHOOK_QUEUE, webhookQueue, type DeliveryJobData } from "@/lib/webhooks/queue";
import { startLeasedInterval } from "../schedulers/leased-interval";

export interface WebhookDeliveryOptions {
  connection: RedisClient;
  log: Logger;
  /** @defaultValue the policy at this process's time scale */
  settings?: DeliverySettings;
  /** Deliveries in flight in this process: each is one short HTTP request. @defaultValue 16 */
  concurrency?: number;
  send?: SendRequest;
}

/**
 * The webhook side of a worker process: a consumer of the `webhooks` queue (one signed POST per
 * attempt, BullMQ spacing the retries) and the relay that moves new outbox rows to that queue,
 * run by one process at a time (a leased interval). Returns a function that stops both.
 */
export function startWebhookDelivery({
  connection,
  log,
  settings = deliverySettings(),
  concurrency = 16,
  send,
}: WebhookDeliveryOptions): () => Promise<void> {
  const worker = new Worker<DeliveryJobData>(
    WEBHOOK_QUEUE,
    async (job) => {
      await deliver(job.data.deliveryId, { settings, attemptsMade: job.attemptsMade, log, send });
    },
    { connection, prefix: env().BOUNDED_REDIS_PREFIX, concurrency },
  );
  worker.on("error", (err) => log.error({ err }, "webhook worker error"));
  const stopRelay = startLeasedInterval(
    connection,
    log,
    { name: "webhook-relay", intervalMs: settings.relayIntervalMs, failure: "webhook relay pass failed" },
    async () => {
      const queued = await relayDeliveries(webhookQueue(), settings);
      if (queued > 0) log.debug({ queued }, "webhook deliveries queued");
    },
  );
  return async () => {
    stopRelay();
    await worker.close();
  };
}

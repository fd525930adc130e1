import { Queue } from "bullmq";
import { env } from "@/lib/env";
import { redis } from "@/lib/redis/client";
import type { DeliverySettings } from "./policy";

/**
 * The `webhooks` queue: deliveries run here, never in a job's slot, so a job never waits on a
 * receiver. Not a queue of the job catalog (lib/catalog/catalog.ts): it carries no Job rows,
 * budgets or kinds — only the id of a WebhookDelivery row.
 */
export const WEBHOOK_QUEUE = "webhooks";

export interface DeliveryJobData {
  deliveryId: string;
}

const holder = globalThis as unknown as { __boundedWebhookQueue?: Queue<DeliveryJobData> };

export function webhookQueue(): Queue<DeliveryJobData> {
  holder.__boundedWebhookQueue ??= new Queue<DeliveryJobData>(WEBHOOK_QUEUE, {
    connection: redis(),
    prefix: env().BOUNDED_REDIS_PREFIX,
  });
  return holder.__boundedWebhookQueue;
}

export async function closeWebhookQueue(): Promise<void> {
  const q = holder.__boundedWebhookQueue;
  holder.__boundedWebhookQueue = undefined;
  await q?.close();
}

/**
 * Queues one delivery. The queue job's id is the delivery's, so queueing it twice (two relays,
 * or a relay that stopped between the add and its note) runs it once. BullMQ spaces the retries
 * (exponential: `backoffMs`, then twice that…).
 */
export async function enqueueDelivery(
  q: Queue<DeliveryJobData>,
  deliveryId: string,
  settings: Pick<DeliverySettings, "attempts" | "backoffMs">,
): Promise<void> {
  await q.add(
    "deliver",
    { deliveryId },
    {
      jobId: deliveryId,
      attempts: settings.attempts,
      backoff: { type: "exponential", delay: settings.backoffMs },
      removeOnComplete: { age: 24 * 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    },
  );
}

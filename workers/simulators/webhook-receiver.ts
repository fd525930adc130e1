import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { DELIVERY_HEADER, SIGNATURE_HEADER } from "@/lib/webhooks/signature";
import { verifyWebhook } from "@/lib/webhooks/verify";
import { HttpError, readJson, sendJson, type Route } from "./router";

/**
 * A tenant's webhook receiver, to test deliveries against: `POST /webhooks/receiver` verifies
 * each delivery's signature with the secret it was given (as a real receiver would, with
 * lib/webhooks/verify.ts), can be told to fail the first N deliveries (500) or to answer slowly,
 * and records what it got. `PUT /webhooks/receiver/_config` `{ secret?, failFirst?, delayMs? }`
 * sets it up (the secret is shown once when an endpoint is registered); `GET
 * /webhooks/receiver/_received` lists the deliveries, `DELETE` forgets them.
 */

export interface WebhookReceiverOptions {
  /** The endpoint's secret. Without one every delivery is refused (401), as unverifiable. */
  secret?: string;
  /** Answer 500 to this many deliveries (after verifying them) before answering 200. @defaultValue 0 */
  failFirst?: number;
  /** Hold each answer this long (real ms): a slow receiver. @defaultValue 0 */
  delayMs?: number;
}

export interface ReceivedDelivery {
  deliveryId: string | null;
  signature: string | null;
  body: string;
  /** Whether the signature verified with the configured secret. */
  verified: boolean;
  /** Why it did not. */
  reason: string | null;
  /** What the receiver answered. */
  answered: number;
  at: string;
}

export interface WebhookReceiver {
  routes: Route[];
  received(): ReceivedDelivery[];
  configure(options: WebhookReceiverOptions): void;
}

const configSchema = z
  .object({
    secret: z.string().min(1).max(200).optional(),
    failFirst: z.number().int().min(0).max(1000).optional(),
    delayMs: z.number().int().min(0).max(600_000).optional(),
  })
  .strict();

async function readText(req: IncomingMessage, limitBytes = 1024 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw new HttpError(413, `request body over ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function createWebhookReceiver(initial: WebhookReceiverOptions = {}): WebhookReceiver {
  let secret = initial.secret;
  let failuresLeft = initial.failFirst ?? 0;
  let delayMs = initial.delayMs ?? 0;
  let received: ReceivedDelivery[] = [];
  const configure = (o: WebhookReceiverOptions) => {
    if (o.secret !== undefined) secret = o.secret;
    if (o.failFirst !== undefined) failuresLeft = o.failFirst;
    if (o.delayMs !== undefined) delayMs = o.delayMs;
  };

  const routes: Route[] = [
    {
      method: "POST",
      path: "/webhooks/receiver",
      handler: async ({ req, res }) => {
        const body = await readText(req);
        const signature = req.headers[SIGNATURE_HEADER.toLowerCase()];
        const header = Array.isArray(signature) ? signature[0] : signature;
        const check = secret
          ? verifyWebhook({ body, header, secret })
          : ({ ok: false, reason: "no secret configured" } as const);
        const answered = !check.ok ? 401 : failuresLeft > 0 ? 500 : 200;
        if (check.ok && failuresLeft > 0) failuresLeft -= 1;
        const deliveryId = req.headers[DELIVERY_HEADER.toLowerCase()];
        received.push({
          deliveryId: typeof deliveryId === "string" ? deliveryId : null,
          signature: header ?? null,
          body,
          verified: check.ok,
          reason: check.ok ? null : check.reason,
          answered,
          at: new Date().toISOString(),
        });
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        if (answered === 200) sendJson(res, 200, { ok: true });
        else
          sendJson(res, answered, {
            error: {
              message: answered === 401 ? `signature refused: ${check.ok ? "" : check.reason}` : "failing on purpose",
              type: "receiver",
            },
          });
      },
    },
    { method: "GET", path: "/webhooks/receiver/_received", handler: ({ res }) => sendJson(res, 200, { received }) },
    {
      method: "DELETE",
      path: "/webhooks/receiver/_received",
      handler: ({ res }) => {
        received = [];
        sendJson(res, 200, { ok: true });
      },
    },
    {
      method: "PUT",
      path: "/webhooks/receiver/_config",
      handler: async ({ req, res }) => {
        const parsed = configSchema.safeParse(await readJson(req));
        if (!parsed.success)
          throw new HttpError(400, parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
        configure(parsed.data);
        sendJson(res, 200, { ok: true, failuresLeft, delayMs, secret: secret ? "set" : "unset" });
      },
    },
  ];
  return { routes, received: () => received, configure };
}

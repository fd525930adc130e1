import { randomBytes } from "node:crypto";
import { z } from "zod";
import { db } from "@/lib/db/client";
import type { Described } from "@/lib/http/operator";
import { tenantSlugSchema } from "@/lib/tenants/slug";
import { logger } from "@/lib/log";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";

const log = logger("webhooks");

/**
 * A tenant's webhook endpoint: where Bounded posts each job ending, signed with the endpoint's
 * secret. The one module behind `PUT`/`DELETE /api/tenants/<tenant>/webhook` and the /webhooks form.
 */

/** An outbound URL: http or https only (no file:, data:, javascript:…), no credentials in it (they would show on pages). */
export const webhookUrlSchema = z
  .string({ error: "url is required" })
  .trim()
  .min(1, { error: "url is required", abort: true })
  .max(2048, "url must be at most 2,048 characters")
  .pipe(z.url({ protocol: /^https?$/, error: "url must be an http:// or https:// URL" }))
  .refine((u) => {
    const parsed = new URL(u);
    return !parsed.username && !parsed.password;
  }, "url must not contain a user name or password");

export const webhookInputSchema = z
  .object({
    url: webhookUrlSchema,
    /** Replace the secret of an existing endpoint (the new one is shown once). */
    rotateSecret: z.boolean().optional(),
  })
  .strict();

export const tenantParamSchema = tenantSlugSchema;

/** `whsec_` + 32 random bytes (base64url), the form receivers know from Stripe. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

export interface WebhookEndpointView {
  tenant: string;
  url: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A tenant name that is not one (the route's `[tenant]`): refused before anything is written. */
export type InvalidTenant = { type: "invalid_tenant"; message: string };

function parseTenant(tenant: string): { ok: true; slug: string } | { ok: false; result: InvalidTenant } {
  const parsed = tenantParamSchema.safeParse(tenant);
  return parsed.success
    ? { ok: true, slug: parsed.data }
    : { ok: false, result: { type: "invalid_tenant", message: parsed.error.issues[0]!.message } };
}

export type SetWebhookResult =
  | InvalidTenant
  /** A new endpoint, or a rotated secret: `secret` is shown this once and never again. */
  | { type: "created" | "rotated"; endpoint: WebhookEndpointView; secret: string }
  /** The URL changed; the secret stays the one the receiver already has. */
  | { type: "updated"; endpoint: WebhookEndpointView; secret: null };

/**
 * Registers or changes a tenant's endpoint (the tenant is created if new). A new endpoint gets a
 * secret generated here; changing the URL keeps the secret unless `rotateSecret`. One
 * transaction: a refusal leaves no tenant behind. The secret is never logged.
 */
export async function setWebhook(tenant: string, input: unknown): Promise<SetWebhookResult> {
  const t = parseTenant(tenant);
  if (!t.ok) return t.result;
  const slug = t.slug;
  const { url, rotateSecret } = webhookInputSchema.parse(input);
  const result = await db().$transaction(async (tx) => {
    const tenantId = await ensureTenant(slug, tx);
    const existing = await tx.webhookEndpoint.findUnique({ where: { tenantId }, select: { id: true } });
    const secret = !existing || rotateSecret ? newWebhookSecret() : null;
    const select = { url: true, createdAt: true, updatedAt: true } as const;
    const row = existing
      ? await tx.webhookEndpoint.update({ where: { tenantId }, data: { url, ...(secret ? { secret } : {}) }, select })
      : await tx.webhookEndpoint.create({ data: { tenantId, url, secret: secret! }, select });
    const endpoint = { tenant: slug, ...row };
    if (!existing) return { type: "created" as const, endpoint, secret: secret! };
    return secret
      ? { type: "rotated" as const, endpoint, secret }
      : { type: "updated" as const, endpoint, secret: null };
  });
  log.info({ tenant: slug, url, change: result.type }, "webhook endpoint set");
  return result;
}

export type RemoveWebhookResult =
  | InvalidTenant
  | { type: "removed"; tenant: string }
  | { type: "not_found"; tenant: string };

/** Removes a tenant's endpoint; deliveries not yet sent are given up (their history stays on the job pages). */
export async function removeWebhook(tenant: string): Promise<RemoveWebhookResult> {
  const t = parseTenant(tenant);
  if (!t.ok) return t.result;
  const slug = t.slug;
  const { count } = await db().webhookEndpoint.deleteMany({ where: { tenant: { slug } } });
  if (count === 0) return { type: "not_found", tenant: slug };
  log.info({ tenant: slug }, "webhook endpoint removed");
  return { type: "removed", tenant: slug };
}

export interface WebhookListRow extends WebhookEndpointView {
  delivered: number;
  pending: number;
  failed: number;
  lastDeliveryAt: Date | null;
}

/** Every endpoint with its deliveries counted by status (the /webhooks page). */
export async function listWebhooks(): Promise<WebhookListRow[]> {
  const rows = await db().webhookEndpoint.findMany({
    orderBy: { tenant: { slug: "asc" } },
    select: { id: true, url: true, createdAt: true, updatedAt: true, tenant: { select: { slug: true } } },
  });
  if (rows.length === 0) return [];
  const [counts, last] = await Promise.all([
    db().webhookDelivery.groupBy({
      by: ["endpointId", "status"],
      where: { endpointId: { in: rows.map((r) => r.id) } },
      _count: { _all: true },
    }),
    db().webhookDelivery.groupBy({
      by: ["endpointId"],
      where: { endpointId: { in: rows.map((r) => r.id) } },
      _max: { createdAt: true },
    }),
  ]);
  const count = (id: string, status: string) =>
    counts.find((c) => c.endpointId === id && c.status === status)?._count._all ?? 0;
  return rows.map((r) => ({
    tenant: r.tenant.slug,
    url: r.url,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    delivered: count(r.id, "delivered"),
    pending: count(r.id, "pending"),
    failed: count(r.id, "failed"),
    lastDeliveryAt: last.find((l) => l.endpointId === r.id)?._max.createdAt ?? null,
  }));
}

/** A set's outcome, told the one way the audit log, the API and the form read it. The secret is in the body only: never in the audit entry. */
export function describeSetWebhook(r: SetWebhookResult): Described {
  if (r.type === "invalid_tenant") return { ok: false, status: 422, code: "invalid_tenant", message: r.message };
  const body = {
    tenant: r.endpoint.tenant,
    url: r.endpoint.url,
    secret: r.secret,
    createdAt: r.endpoint.createdAt.toISOString(),
    updatedAt: r.endpoint.updatedAt.toISOString(),
  };
  switch (r.type) {
    case "created":
      return {
        ok: true,
        status: 201,
        code: "created",
        message: `Webhook for ${r.endpoint.tenant} registered: ${r.endpoint.url}. Copy its secret now; it is not shown again.`,
        audit: `registered ${r.endpoint.url}`,
        body,
      };
    case "rotated":
      return {
        ok: true,
        status: 200,
        code: "rotated",
        message: `Webhook for ${r.endpoint.tenant} now posts to ${r.endpoint.url} with a new secret. Copy it now; it is not shown again.`,
        audit: `set ${r.endpoint.url}, secret rotated`,
        body,
      };
    case "updated":
      return {
        ok: true,
        status: 200,
        code: "updated",
        message: `Webhook for ${r.endpoint.tenant} now posts to ${r.endpoint.url}; its secret is unchanged.`,
        audit: `set ${r.endpoint.url}`,
        body,
      };
  }
}

export function describeRemoveWebhook(r: RemoveWebhookResult): Described {
  switch (r.type) {
    case "invalid_tenant":
      return { ok: false, status: 422, code: "invalid_tenant", message: r.message };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: `${r.tenant} has no webhook.` };
    case "removed":
      return {
        ok: true,
        status: 200,
        code: "removed",
        message: `Webhook for ${r.tenant} removed; deliveries not yet sent are given up.`,
        body: { tenant: r.tenant, removed: true },
      };
  }
}

import { operatorRoute } from "@/lib/http/operator";
import {
  describeRemoveWebhook,
  describeSetWebhook,
  removeWebhook,
  setWebhook,
  webhookInputSchema,
} from "@/lib/webhooks/endpoints";

export const dynamic = "force-dynamic";

type Params = { tenant: string };

/**
 * Operator: `{ url, rotateSecret? }` → 201 `{ tenant, url, secret, createdAt, updatedAt }` for a
 * new endpoint (the secret is shown this once), 200 for a changed one (`secret` null unless
 * rotated). The tenant is created if new. The API twin of the /webhooks form; audited.
 */
export const PUT = operatorRoute({
  name: "PUT /api/tenants/:tenant/webhook",
  action: "webhook.set",
  input: { body: webhookInputSchema, example: '{ "url": "https://example.com/hooks/bounded" }' },
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (input, { params }) => setWebhook(params.tenant, input),
  describe: describeSetWebhook,
});

/** Operator: removes the tenant's endpoint → 200, or 404 when it has none; audited. */
export const DELETE = operatorRoute({
  name: "DELETE /api/tenants/:tenant/webhook",
  action: "webhook.remove",
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (_input, { params }: { params: Params }) => removeWebhook(params.tenant),
  describe: describeRemoveWebhook,
});

"use server";

import { z } from "zod";
import { operatorAction, type ActionState as OperatorActionState } from "@/lib/http/operator";
import {
  describeRemoveWebhook,
  describeSetWebhook,
  removeWebhook,
  setWebhook,
  tenantParamSchema,
  webhookUrlSchema,
} from "@/lib/webhooks/endpoints";

/** The form's state: the secret of a new endpoint (or a rotated one) comes back this once. */
export interface ActionState extends OperatorActionState {
  secret?: string | null;
}

const text = (form: FormData, name: string) => {
  const v = form.get(name);
  return typeof v === "string" ? v : "";
};
const target = (raw: { tenant: string }) => raw.tenant.slice(0, 100) || null;

const set = operatorAction({
  action: "webhook.set",
  fields: (form) => ({
    tenant: text(form, "tenant"),
    url: text(form, "url"),
    rotateSecret: form.get("rotateSecret") === "on",
  }),
  schema: z.object({ tenant: tenantParamSchema, url: webhookUrlSchema, rotateSecret: z.boolean() }),
  target,
  params: (input) => ({ tenant: input.tenant, url: input.url, rotateSecret: input.rotateSecret }),
  run: (input) => setWebhook(input.tenant, { url: input.url, rotateSecret: input.rotateSecret }),
  describe: describeSetWebhook,
  state: (result, d): ActionState => ({
    ok: d.ok,
    message: d.message,
    secret: "secret" in result ? result.secret : null,
  }),
  revalidate: () => "/webhooks",
});

const remove = operatorAction({
  action: "webhook.remove",
  fields: (form) => ({ tenant: text(form, "tenant") }),
  schema: z.object({ tenant: tenantParamSchema }),
  target,
  run: (input) => removeWebhook(input.tenant),
  describe: describeRemoveWebhook,
  revalidate: () => "/webhooks",
});

/** The Webhooks page's form: the same lib function as PUT /api/tenants/:tenant/webhook, with the same audit entry. */
export async function setWebhookAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return set(prev, form);
}

/** The Webhooks page's Remove: the same lib function as DELETE /api/tenants/:tenant/webhook. */
export async function removeWebhookAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return remove(prev, form);
}

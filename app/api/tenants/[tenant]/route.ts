import { operatorRoute } from "@/lib/http/operator";
import { deleteTenant, deleteTenantQuerySchema, describeDeleteTenant } from "@/lib/actions/delete-tenant";

export const dynamic = "force-dynamic";

type Params = { tenant: string };

/**
 * Operator: deletes a tenant and everything of it (lib/actions/delete-tenant.ts). Without
 * `?confirm=<tenant>` a dry run: 200 with what would be removed, nothing deleted. With it: 200 with
 * what was removed; 409 while any of its jobs is queued, running or waiting. Audited either way
 * (the audit entry stays).
 */
export const DELETE = operatorRoute({
  name: "DELETE /api/tenants/:tenant",
  action: (input) => (input?.confirm !== undefined ? "tenant.delete" : "tenant.delete_preview"),
  input: { query: deleteTenantQuerySchema },
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (input, { principal, params }) => deleteTenant(params.tenant, principal, input),
  describe: describeDeleteTenant,
});

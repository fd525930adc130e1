import { operatorRoute } from "@/lib/http/operator";
import { deleteTenant, deleteTenantQuerySchema, describeDeleteTenant } from "@/lib/actions/delete-tenant";

export const dynamic = "force-dynamic";

type Params = { tenant: string };

/**
 * Operator: deletes a tenant and everything of it (lib/actions/delete-tenant.ts). Without
 * `?confirm=<tenant>` a dry run: 200 with what would be removed, nothing deleted. With it: the
 * deletion starts (409 while any of its jobs is queued, running or waiting) and goes a batch at a
 * time — 200 with what was removed when it finished within the request, else 202 with what is
 * removed so far while the workers go on; asked again meanwhile (either way), 202 with the count so
 * far. Audited either way, one entry per call (the audit entry stays).
 */
export const DELETE = operatorRoute({
  name: "DELETE /api/tenants/:tenant",
  action: (input) => (input?.confirm !== undefined ? "tenant.delete" : "tenant.delete_preview"),
  input: { query: deleteTenantQuerySchema },
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (input, { principal, params }) => deleteTenant(params.tenant, principal, input),
  describe: describeDeleteTenant,
});

import { operatorRoute } from "@/lib/http/operator";
import { describeTenantRetention, setTenantRetention, tenantRetentionSchema } from "@/lib/retention/tenant-choice";

export const dynamic = "force-dynamic";

type Params = { tenant: string };

/**
 * Operator: `{ resultsDays }` → 200: how long the tenant keeps its own results (its imports'
 * transactions, its stored category answers) after the job that made them ended; `null` keeps them
 * until the tenant is deleted. 404 for an unknown tenant; audited.
 */
export const PUT = operatorRoute({
  name: "PUT /api/tenants/:tenant/retention",
  action: "tenant.retention",
  input: { body: tenantRetentionSchema, example: '{ "resultsDays": 365 } or { "resultsDays": null }' },
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (input, { params }) => setTenantRetention(params.tenant, input),
  describe: describeTenantRetention,
});

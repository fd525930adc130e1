import { operatorRoute } from "@/lib/http/operator";
import { grantUnits, packGrantSchema } from "@/lib/quota/packs";

export const dynamic = "force-dynamic";

/**
 * Operator: JSON `{ tenant, units }` (1–100,000) → 201 with the tenant's pack after the grant
 * `{ tenant, granted, size, remaining, live, spent, openDebts, debtsSettled }`. The tenant and its
 * pack are created on the first grant; open debts are paid from the new units first. The API twin
 * of `npm run packs -- grant`; every call is audited, refusals included.
 */
export const POST = operatorRoute({
  name: "POST /api/packs",
  action: "pack.grant",
  input: { body: packGrantSchema, example: '{ "tenant": "acme", "units": 100 }' },
  target: (input) => input?.tenant ?? null,
  run: (input) => grantUnits(input),
  describe: (g) => {
    const debts = g.debtsSettled > 0 ? `, ${g.debtsSettled} open debt(s) paid from them` : "";
    return {
      ok: true,
      status: 201,
      code: "granted",
      message: `granted ${g.granted} unit(s) to ${g.tenant}${debts}: ${g.remaining} of ${g.size} remaining`,
      body: g,
    };
  },
});

import { audited } from "@/lib/audit/audited";
import { route } from "@/lib/http/api";
import { readJsonBody } from "@/lib/http/body";
import { grantUnits, packGrantSchema } from "@/lib/quota/packs";

export const dynamic = "force-dynamic";

/**
 * Operator: JSON `{ tenant, units }` (1–100,000) → 201 with the tenant's pack after the grant
 * `{ tenant, granted, size, remaining, live, spent, openDebts, debtsSettled }`. The tenant and its
 * pack are created on the first grant; open debts are paid from the new units first. The API twin
 * of `npm run packs -- grant`; every call is audited, refusals included.
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request) => {
    const body = await readJsonBody(request, '{ "tenant": "acme", "units": 100 }');
    const parsed = packGrantSchema.safeParse(body.ok ? body.value : undefined);
    const granted = await audited(
      "operator",
      { action: "pack.grant", target: parsed.success ? parsed.data.tenant : null, params: parsed.success ? parsed.data : { invalid: true } },
      async () => {
        if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
        const g = await grantUnits(parsed.data);
        const debts = g.debtsSettled > 0 ? `, ${g.debtsSettled} open debt(s) paid from them` : "";
        return { result: "ok", message: `granted ${g.granted} unit(s) to ${g.tenant}${debts}: ${g.remaining} of ${g.size} remaining`, value: g };
      },
    );
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    return Response.json(granted, { status: 201 });
  },
  "POST /api/packs",
);

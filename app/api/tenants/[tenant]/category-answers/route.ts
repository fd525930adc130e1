import { clearCategoryAnswers, describeClearCategoryAnswers } from "@/lib/answers/store";
import { operatorRoute } from "@/lib/http/operator";

export const dynamic = "force-dynamic";

type Params = { tenant: string };

/**
 * Operator: forgets the tenant's stored category answers → 200 `{ tenant, removed }`; 404 for a
 * tenant that does not exist, 422 for a malformed name. The API twin of the form on
 * /model-calls; audited.
 */
export const DELETE = operatorRoute({
  name: "DELETE /api/tenants/:tenant/category-answers",
  action: "category_answers.clear",
  target: (_input, { tenant }: Params) => tenant.slice(0, 100),
  run: (_input, { params }: { params: Params }) => clearCategoryAnswers(params.tenant),
  describe: describeClearCategoryAnswers,
});

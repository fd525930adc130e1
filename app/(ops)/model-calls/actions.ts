"use server";

import { z } from "zod";
import { clearCategoryAnswers, describeClearCategoryAnswers } from "@/lib/answers/store";
import { operatorAction, type ActionState } from "@/lib/http/operator";
import { tenantSlugSchema } from "@/lib/tenants/slug";

const clear = operatorAction({
  action: "category_answers.clear",
  fields: (form) => {
    const tenant = form.get("tenant");
    return { tenant: typeof tenant === "string" ? tenant : "" };
  },
  schema: z.object({ tenant: tenantSlugSchema }),
  target: (raw) => raw.tenant.slice(0, 100) || null,
  run: (input) => clearCategoryAnswers(input.tenant),
  describe: describeClearCategoryAnswers,
  revalidate: () => "/model-calls",
});

/** The Model calls page's “Clear stored answers”: the same lib function as DELETE /api/tenants/:tenant/category-answers. */
export async function clearCategoryAnswersAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return clear(prev, form);
}

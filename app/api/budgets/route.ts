import { getBudgetReport } from "@/lib/reports/budgets";
import { route } from "@/lib/http/api";

export const dynamic = "force-dynamic";

/** The same report the /budgets page draws: configuration, what live workers use, drift, risk. */
export const GET = route("viewer", async () => Response.json(await getBudgetReport()), "GET /api/budgets");

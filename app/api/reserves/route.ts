import { route } from "@/lib/http/api";
import { getReservesReport } from "@/lib/reports/reserves";

export const dynamic = "force-dynamic";

/** The same report /reserves draws: live reserve ages against the worst case and the sweep window, reclaims, late releases, the policy arithmetic. */
export const GET = route("viewer", async () => Response.json(await getReservesReport()), "GET /api/reserves");

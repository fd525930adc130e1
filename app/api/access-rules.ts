/**
 * Who may call what: every route handler and every server action of the product, with the role
 * it needs. Kept next to the routes; a test fails when a route or an action exists without a rule
 * here (or a rule without its route), and the browser suite walks this list as anonymous, viewer
 * and operator. The checks themselves run in the handlers (`route()`, `operatorRoute()`,
 * `operatorAction()`).
 */
export type Access = "public" | "viewer" | "operator";

export const ROUTE_ACCESS = {
  "GET /api/health": "public",
  "POST /api/auth/login": "public",
  "GET /api/livez": "public",
  "GET /api/readyz": "public",
  "GET /api/metrics": "public",
  "POST /api/imports": "public",
  "POST /api/documents": "public",
  "GET /api/progress/[token]": "public",
  "GET /api/progress/[token]/events": "public",
  "GET /api/progress/[token]/result.csv": "public",
  "GET /api/progress/[token]/failed-rows.csv": "public",
  "GET /api/jobs": "viewer",
  "GET /api/jobs/[id]": "viewer",
  "GET /api/budgets": "viewer",
  "GET /api/model-calls/histogram": "viewer",
  "GET /api/reserves": "viewer",
  "GET /api/stuck": "viewer",
  "POST /api/stuck/[cause]/fail": "operator",
  "POST /api/stuck/[cause]/handled": "operator",
  "POST /api/stuck/[cause]/retry": "operator",
  "POST /api/jobs/[id]/retry": "operator",
  "POST /api/jobs/[id]/cancel": "operator",
  "GET /api/jobs/[id]/split-plan": "operator",
  "GET /api/jobs/[id]/events": "operator",
  "POST /api/jobs/[id]/split": "operator",
  "POST /api/jobs/retry": "operator",
  "POST /api/jobs/reask": "operator",
  "POST /api/agent-runs": "operator",
  "POST /api/generations": "operator",
  "POST /api/packs": "operator",
  "POST /api/sweeps/overdue-invoices": "operator",
  "POST /api/syncs": "operator",
  "GET /api/limiter": "viewer",
  "GET /api/marketplace/preview": "viewer",
  "GET /api/queues": "operator",
  "POST /api/queues/[queue]/pause": "operator",
  "POST /api/queues/[queue]/resume": "operator",
  "PUT /api/tenants/[tenant]/webhook": "operator",
  "DELETE /api/tenants/[tenant]/webhook": "operator",
  "DELETE /api/tenants/[tenant]/category-answers": "operator",
  "DELETE /api/tenants/[tenant]": "operator",
  "PUT /api/tenants/[tenant]/retention": "operator",
} as const satisfies Record<string, Access>;

export const ACTION_ACCESS = {
  "app/login/actions.ts#signIn": "public",
  "app/login/actions.ts#signOut": "public",
  "app/(ops)/jobs/actions.ts#bulkRetryAction": "operator",
  "app/(ops)/jobs/[id]/actions.ts#retryJobAction": "operator",
  "app/(ops)/jobs/[id]/actions.ts#reaskRowsAction": "operator",
  "app/(ops)/jobs/[id]/actions.ts#cancelJobAction": "operator",
  "app/(ops)/jobs/[id]/actions.ts#splitJobAction": "operator",
  "app/(ops)/stuck/actions.ts#stuckGroupAction": "operator",
  "app/(ops)/queues/actions.ts#pauseQueueAction": "operator",
  "app/(ops)/queues/actions.ts#resumeQueueAction": "operator",
  "app/(ops)/webhooks/actions.ts#setWebhookAction": "operator",
  "app/(ops)/webhooks/actions.ts#removeWebhookAction": "operator",
  "app/(ops)/model-calls/actions.ts#clearCategoryAnswersAction": "operator",
} as const satisfies Record<string, Access>;

import { requirePageViewer } from "@/lib/auth/principal";
import { hasRole } from "@/lib/auth/roles";
import { listWebhooks } from "@/lib/webhooks/endpoints";
import { WEBHOOK_POLICY } from "@/lib/webhooks/policy";
import { formatDuration } from "@/lib/format/duration";
import { DataTable, num } from "../../components/data-table";
import { formatCount } from "@/lib/format/number";
import { fmtTime } from "../../components/format";
import { PageHead } from "../../components/page-head";
import { RemoveWebhookForm, SetWebhookForm } from "./webhook-forms";

export const dynamic = "force-dynamic";
export const metadata = { title: "Webhooks" };

export default async function WebhooksPage() {
  const principal = await requirePageViewer("/webhooks");
  const canAct = hasRole(principal, "operator");
  const rows = await listWebhooks();
  const retries = Array.from({ length: WEBHOOK_POLICY.attempts - 1 }, (_, i) =>
    formatDuration(WEBHOOK_POLICY.backoffMs * 2 ** i),
  ).join(", ");
  return (
    <main className="page">
      <PageHead
        title="Webhooks"
        description={`When a tenant's job ends, Bounded posts its summary to the tenant's URL, signed (Bounded-Signature: t=…,v1=HMAC-SHA256). Up to ${WEBHOOK_POLICY.attempts} tries, ${retries} apart; ${formatDuration(WEBHOOK_POLICY.timeoutMs)} per try. Each job's page shows its deliveries.`}
      />
      <section className="panel" aria-labelledby="set-heading">
        <h2 id="set-heading">Register or change</h2>
        <SetWebhookForm canAct={canAct} />
      </section>
      <section className="panel" aria-labelledby="list-heading">
        <h2 id="list-heading">
          Endpoints <span className="muted small">({formatCount(rows.length)})</span>
        </h2>
        <DataTable
          headings={["Tenant", "URL", num("Delivered"), num("Pending"), num("Failed"), "Last job ended", ""]}
          rows={rows}
          label="Webhook endpoints"
          empty="No tenant has a webhook yet."
        >
          {(r) => (
            <tr key={r.tenant} data-tenant={r.tenant}>
              <td className="mono">{r.tenant}</td>
              <td className="mono small" style={{ wordBreak: "break-all" }}>
                {r.url}
              </td>
              <td className="num">{formatCount(r.delivered)}</td>
              <td className="num">{formatCount(r.pending)}</td>
              <td className="num" style={{ color: r.failed ? "var(--bad)" : undefined }}>
                {formatCount(r.failed)}
              </td>
              <td className="small">{r.lastDeliveryAt ? fmtTime(r.lastDeliveryAt.toISOString()) : "—"}</td>
              <td>
                <RemoveWebhookForm tenant={r.tenant} canAct={canAct} />
              </td>
            </tr>
          )}
        </DataTable>
      </section>
    </main>
  );
}

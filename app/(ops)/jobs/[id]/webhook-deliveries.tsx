import type { DeliveryView } from "@/lib/webhooks/deliveries";
import { WEBHOOK_POLICY } from "@/lib/webhooks/policy";
import { STATUS_LABEL } from "@/lib/core/job-statuses";
import { DataTable, num } from "../../../components/data-table";
import { fmtTime } from "../../../components/format";

const LABEL: Record<DeliveryView["status"], string> = { pending: "Pending", delivered: "Delivered", failed: "Failed" };
const TONE: Record<DeliveryView["status"], string> = { pending: "warn", delivered: "ok", failed: "bad" };

/** The job's webhook deliveries: one per ending it announced, with what the tenant's receiver answered. */
export function WebhookDeliveries({ deliveries }: { deliveries: DeliveryView[] }) {
  if (deliveries.length === 0) return null;
  const delivered = deliveries.filter((d) => d.status === "delivered").length;
  return (
    <section className="panel" aria-labelledby="webhooks-heading">
      <h2 id="webhooks-heading">
        Webhook deliveries{" "}
        <span className="muted small">
          ({delivered} of {deliveries.length} delivered)
        </span>
      </h2>
      <DataTable
        headings={["Ending", "Delivery", num("Attempts"), "Last answer", "Next try", "URL"]}
        rows={deliveries}
        label="Webhook deliveries"
        testId="webhook-deliveries"
      >
        {(d) => (
          <tr key={d.id} data-delivery={d.status}>
            <td>{STATUS_LABEL[d.jobStatus]}</td>
            <td>
              <span className={`badge ${TONE[d.status]}`}>{LABEL[d.status]}</span>
              {d.deliveredAt ? <span className="muted small"> {fmtTime(d.deliveredAt.toISOString())}</span> : null}
            </td>
            <td className="num">
              {d.attempts} of {WEBHOOK_POLICY.attempts}
            </td>
            <td className="small">
              {[d.lastStatusCode !== null ? `HTTP ${d.lastStatusCode}` : null, d.lastError]
                .filter(Boolean)
                .join(" — ") || "—"}
            </td>
            <td className="small">
              {d.status === "pending" && d.nextAttemptAt
                ? fmtTime(d.nextAttemptAt.toISOString())
                : d.status === "pending"
                  ? "queued"
                  : "—"}
            </td>
            <td className="mono small" style={{ wordBreak: "break-all" }}>
              {d.url}
            </td>
          </tr>
        )}
      </DataTable>
    </section>
  );
}

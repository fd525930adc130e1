import Link from "next/link";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { formatCount, formatUsd } from "@/lib/format/number";
import { type FailoverCeiling, failoverFor, modelRouting, routeFor, type ModelRouting } from "@/lib/model-providers";
import { readBreakers } from "@/lib/ratelimit/breaker";
import { DataTable, num } from "../../components/data-table";

const STATE_LABEL = {
  closed: "answering",
  open: "down",
  half_open: "down, a probe is out",
  misconfigured: "refuses our configuration",
} as const;

/** "primary → backup (failover: deadline)"; a route of one has no failover to name. */
function routeText(kind: string | undefined, routing: ModelRouting): string {
  const route = routeFor(kind, routing);
  const names = route.map((p) => p.name).join(" → ");
  return route.length > 1 ? `${names} (failover: ${failoverFor(kind, routing)})` : names;
}

/** "at most $0.50 a job and $20.00 a tenant a day (UTC)", or that there is no ceiling. */
function ceilingText({ perJobUsd, perTenantDayUsd }: FailoverCeiling): string {
  const parts = [
    perJobUsd === undefined ? null : `${formatUsd(perJobUsd)} a job`,
    perTenantDayUsd === undefined ? null : `${formatUsd(perTenantDayUsd)} a tenant a day (UTC)`,
  ].filter(Boolean);
  return parts.length === 0
    ? "no ceiling (BOUNDED_FAILOVER_MAX_USD_PER_JOB, _PER_TENANT_DAY)"
    : `at most ${parts.join(" and ")}; past it a call waits for the provider before it`;
}

/**
 * The model providers configured and the route each kind's calls take through them: where a call
 * goes, and where it goes while the provider before is down (lib/model-providers.ts). Each
 * provider's state is its circuit breaker's; its latency is the chart's, filtered by its model.
 */
export async function ProvidersSection() {
  const routing = modelRouting();
  const breakers = await readBreakers();
  const stateOf = (service: string) => breakers?.find((b) => b.service === service)?.state;
  const routes = JOB_KINDS.filter((kind) => routing.routes[kind] !== undefined || routing.failover[kind] !== undefined);
  return (
    <section className="panel" aria-labelledby="providers-title" data-testid="model-providers">
      <h2 id="providers-title">Model providers and routes</h2>
      <p className="small muted">
        Each kind's model calls go to the first provider on its route, and to the next one while those before it are
        down (circuit open, silent or refusing our configuration) — and, under the policy <em>deadline</em>, when they
        would answer after the job's deadline — back as soon as a probe finds the first one answering. A route of one
        provider, or the policy <em>never</em>, waits for it. Limits are shared by every worker process.
      </p>
      <DataTable
        headings={[
          "Provider",
          "Model",
          "Endpoint",
          "State",
          num("In flight at once"),
          num("Requests a second"),
          num("Tokens a minute"),
        ]}
        rows={routing.providers}
        testId="model-provider-list"
        label="Model providers"
      >
        {(p) => {
          const state = stateOf(p.service);
          return (
            <tr key={p.name}>
              <td className="mono">{p.name}</td>
              <td className="mono">
                <Link href={`/model-calls?model=${encodeURIComponent(p.model)}`}>{p.model}</Link>
              </td>
              <td className="mono">{new URL(p.baseUrl).origin}</td>
              <td>{state ? STATE_LABEL[state] : "unknown (Redis not answering)"}</td>
              <td className="num">{formatCount(p.concurrency)}</td>
              <td className="num">{formatCount(p.rps)}</td>
              <td className="num">{p.tpm === undefined ? "learnt from its headers" : formatCount(p.tpm)}</td>
            </tr>
          );
        }}
      </DataTable>
      <p data-testid="model-routes">
        <strong>Routes:</strong> every kind: {routeText(undefined, routing)}
        {routes.map((kind) => (
          <span key={kind}>
            ; <span className="mono">{kind}</span>: {routeText(kind, routing)}
          </span>
        ))}
        .
      </p>
      <p data-testid="failover-ceiling">
        <strong>Failover cost:</strong> {ceilingText(routing.ceiling)}.
      </p>
    </section>
  );
}

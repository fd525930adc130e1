import { formatDurationRounded } from "@/lib/format/duration";
import { outageCause, readBreakers } from "@/lib/ratelimit/breaker";
import { fallbacksOf, providerOfName, providerVariables, type ModelService } from "@/lib/model-providers";
import { familyOf, serviceName, type OutsideService } from "@/lib/ratelimit/breaker-services";

/** "14:02 UTC": when an outage began, to the minute (the banner says how long ago beside it). */
const clock = (d: Date) => `${d.toISOString().slice(11, 16)} UTC`;
const capitalised = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * What happens to the work meanwhile: a model provider's calls go to the fallbacks on their routes
 * that are up (kinds whose route has none wait); any other service's jobs wait. Never failed.
 */
function meanwhile(service: OutsideService, breakers: { service: string; state: string }[]): string {
  const up = fallbacksOf(service).filter((name) => {
    const fallback = providerOfName(name);
    return fallback && breakers.find((b) => b.service === fallback.service)?.state === "closed";
  });
  if (up.length === 0) return "jobs are waiting, nothing is failed for it.";
  return `its calls go to ${up.join(", then ")} on their route meanwhile (a kind whose route has no other provider waits); nothing is failed for it.`;
}

/**
 * A red banner per outside service that is down (its circuit breaker open, misconfigured or
 * half-open): since when, why — refused calls, silence, or a configuration it refuses — and that
 * jobs wait for it rather than fail. Nothing at all while every service is up;
 * a note when the breakers cannot be read (Redis away), since "nothing shown" would then mislead.
 */
export async function OutsideServicesBanner({ now = new Date() }: { now?: Date }) {
  const breakers = await readBreakers();
  if (breakers === null) {
    return (
      <p className="message warn" role="status">
        Whether the outside services are up cannot be read right now (Redis did not answer).
      </p>
    );
  }
  const down = breakers.filter((b) => b.state !== "closed");
  if (down.length === 0) return null;
  return (
    <section aria-label="Outside services down" data-testid="outside-services-down">
      {down.map((b) => (
        <p key={b.service} className="message bad" role="alert" data-service={b.service}>
          <strong>
            {capitalised(serviceName(b.service).replace(/^the /, ""))}{" "}
            {b.state === "misconfigured" ? "misconfigured" : "down"} since{" "}
            {b.since
              ? `${clock(b.since)} (${formatDurationRounded(Math.max(0, now.getTime() - b.since.getTime()))})`
              : "just now"}
          </strong>{" "}
          — {outageCause(b.error)}; {meanwhile(b.service, breakers)}
          {b.state === "misconfigured"
            ? ` Fix its configuration${familyOf(b.service) === "model" ? ` (${providerVariables(b.service as ModelService)})` : ""} and restart the workers: the next probe resumes every job by itself.`
            : ""}
          {b.state === "half_open"
            ? " A probe call is out now."
            : b.probeAt
              ? ` Probed again from ${b.probeAt.toISOString().slice(11, 19)} UTC, by the first call after then.`
              : ""}
        </p>
      ))}
    </section>
  );
}

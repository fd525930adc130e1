import { createHash } from "node:crypto";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import type { MarketplaceItem, MarketplacePage } from "@/lib/marketplace/schemas";
import {
  BUCKETS,
  FAMILIES,
  bucketRate,
  isFamily,
  scopeOf,
  type BucketSpec,
  type Family,
} from "@/lib/ratelimit/buckets";
import { HttpError, errorBody, sendJson, type Route } from "./router";
import { createCallerWait, sendServerError, type SimulatedService, type SimulatorOptions } from "./simulated-call";

const log = logger("simulators.marketplace");

/** Latency of one page in production: 40–200 ms, uniform (a paginated read API, not a model). */
function sampleMarketplaceLatencyMs(random: () => number = Math.random): number {
  return 40 + random() * 160;
}

export interface MarketplaceSimulatorOptions extends SimulatorOptions {
  /** Pages each tenant has in each family (fixed per tenant and family). @defaultValue 10 */
  pages?: number | ((tenant: string, family: Family) => number);
  /** @defaultValue 20 */
  itemsPerPage?: number;
  /** One page's production latency in ms, before scaling. @defaultValue `sampleMarketplaceLatencyMs` */
  latencyMs?: () => number;
  /** Share of accepted requests answered with a 500 (after their latency). @defaultValue 0 */
  errorRate?: number;
  /** The per-tenant limits the service enforces. @defaultValue `BUCKETS` (what the limiter uses) */
  buckets?: Record<Family, BucketSpec>;
}

export interface MarketplaceViolations {
  /** Requests answered 429 because the tenant's bucket was empty. */
  total: number;
  byFamily: Record<Family, number>;
  /** By scope, `family:tenant`; only scopes with at least one violation. */
  byScope: Record<string, number>;
}

export interface MarketplaceStats {
  /** Requests let through the rate limit (answered 200, 404 for a page past the end, or 500). */
  accepted: number;
  violations: MarketplaceViolations;
}

export interface MarketplaceSimulator extends SimulatedService {
  violations(): MarketplaceViolations;
  stats(): MarketplaceStats;
  /** Clears the counters and refills every bucket. */
  reset(): void;
  /** The next `n` requests let through the rate limit answer 500 (after their latency). */
  failNext(n: number): void;
}

/** A family's records for one page, the same on every call. */
export function marketplaceItems(family: Family, tenant: string, page: number, count: number): MarketplaceItem[] {
  return Array.from({ length: count }, (_, i) => {
    const hash = createHash("sha256").update(`${family}\0${tenant}\0${page}\0${i}`).digest();
    const n = hash.readUInt32BE(0);
    const day = new Date(Date.UTC(2026, 0, 1) + (hash.readUInt16BE(4) % 365) * 86_400_000);
    const value = family === "statistics" ? n % 5_000 : family === "orders" ? 500 + (n % 50_000) : n % 20_000;
    return { id: `${family}-${hash.toString("hex", 6, 14)}`, date: day.toISOString().slice(0, 10), value };
  });
}

/**
 * The marketplace API: `GET /marketplace/:family?tenant=…&page=…` (pages from 1) →
 * 200 `{ items, page, nextPage }`. Each tenant has its own token bucket per family, with the
 * limits of `BUCKETS`, kept in this process's memory — the service shares nothing with the
 * limiter. An empty bucket answers 429 with `Retry-After` (whole seconds) and `retry-after-ms`
 * (real milliseconds, precise under a small time scale), and counts a violation.
 * Errors use the simulators' JSON shape: 400 without `tenant` or with a bad `page`, 404 for an
 * unknown family or a page past the end, 500 for the configured share of calls.
 * `GET /marketplace/_stats` reads the counters, `DELETE /marketplace/_stats` resets them.
 */
export function createMarketplaceSimulator(options: MarketplaceSimulatorOptions = {}): MarketplaceSimulator {
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const latencyMs = options.latencyMs ?? (() => sampleMarketplaceLatencyMs(random));
  const errorRate = options.errorRate ?? 0;
  const itemsPerPage = options.itemsPerPage ?? 20;
  const specs = options.buckets ?? BUCKETS;
  const pagesOf =
    typeof options.pages === "function" ? options.pages : () => (options.pages as number | undefined) ?? 10;

  const buckets = new Map<string, { tokens: number; at: number }>();
  let accepted = 0;
  let violations = emptyViolations();
  let failures = 0;
  const caller = createCallerWait(timeScale, log);

  /** Takes a token from the scope's bucket, or answers how many real ms until there is one. */
  function take(family: Family, tenant: string): { ok: true } | { ok: false; waitMs: number } {
    const { capacity, refillPerMs } = bucketRate(specs[family], timeScale, 0);
    const scope = scopeOf(family, tenant);
    const now = performance.now();
    const bucket = buckets.get(scope) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + (now - bucket.at) * refillPerMs);
    bucket.at = now;
    buckets.set(scope, bucket);
    if (buckets.size > 10_000) prune(now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, waitMs: Math.ceil((1 - bucket.tokens) / refillPerMs) };
  }

  /** Forgets buckets that have refilled: a full bucket and no bucket are the same. */
  function prune(now: number): void {
    for (const [scope, bucket] of buckets) {
      const family = scope.slice(0, scope.indexOf(":")) as Family;
      const { capacity, refillPerMs } = bucketRate(specs[family], timeScale, 0);
      if (bucket.tokens + (now - bucket.at) * refillPerMs >= capacity) buckets.delete(scope);
    }
  }

  const stats = (): MarketplaceStats => ({
    accepted,
    violations: { total: violations.total, byFamily: { ...violations.byFamily }, byScope: { ...violations.byScope } },
  });
  const reset = () => {
    buckets.clear();
    accepted = 0;
    violations = emptyViolations();
    failures = 0;
  };

  const statsRoutes: Route[] = [
    { method: "GET", path: "/marketplace/_stats", handler: ({ res }) => sendJson(res, 200, stats()) },
    {
      method: "DELETE",
      path: "/marketplace/_stats",
      handler: ({ res }) => {
        reset();
        sendJson(res, 200, stats());
      },
    },
  ];

  const page: Route = {
    method: "GET",
    path: "/marketplace/:family",
    handler: async ({ req, res, url, params }) => {
      const family = params.family!;
      if (!isFamily(family))
        throw new HttpError(
          404,
          `unknown endpoint family ${JSON.stringify(family)}; there are ${FAMILIES.join(", ")}`,
          "not_found",
        );
      const tenant = url.searchParams.get("tenant");
      if (!tenant) throw new HttpError(400, "the tenant query parameter is required (?tenant=<slug>)");
      if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/.test(tenant))
        throw new HttpError(400, `not a tenant slug: ${JSON.stringify(tenant.slice(0, 100))}`);
      const pageText = url.searchParams.get("page") ?? "1";
      if (!/^[1-9][0-9]{0,8}$/.test(pageText))
        throw new HttpError(400, `page must be a whole number from 1, got ${JSON.stringify(pageText.slice(0, 20))}`);
      const pageNumber = Number(pageText);

      const taken = take(family, tenant);
      if (!taken.ok) {
        const scope = scopeOf(family, tenant);
        violations.total++;
        violations.byFamily[family]++;
        violations.byScope[scope] = (violations.byScope[scope] ?? 0) + 1;
        const spec = specs[family];
        log.warn({ scope, waitMs: taken.waitMs }, "rate limit exceeded");
        sendJson(
          res,
          429,
          errorBody(
            `rate limit exceeded for ${scope}: ${spec.refillPerWindow} requests per ${spec.windowMs / 1000} s; retry in ${taken.waitMs} ms`,
            "rate_limited",
          ),
          {
            "retry-after": String(Math.max(1, Math.ceil(taken.waitMs / 1000))),
            "retry-after-ms": String(taken.waitMs),
          },
        );
        return;
      }
      accepted++;

      if (!(await caller.wait({ req, res }, latencyMs))) return;
      if (failures > 0 || random() < errorRate) {
        if (failures > 0) failures--;
        sendServerError(res, "The marketplace had an error while processing the request.");
        return;
      }
      const pages = pagesOf(tenant, family);
      if (pageNumber > pages)
        throw new HttpError(
          404,
          `page ${pageNumber} does not exist: ${tenant} has ${pages} pages of ${family}`,
          "not_found",
        );
      const body: MarketplacePage = {
        items: marketplaceItems(family, tenant, pageNumber, itemsPerPage),
        page: pageNumber,
        nextPage: pageNumber < pages ? pageNumber + 1 : null,
      };
      sendJson(res, 200, body);
    },
  };

  return {
    routes: [...statsRoutes, page],
    violations: () => stats().violations,
    stats,
    reset,
    failNext: (n) => {
      failures = n;
    },
    inFlight: caller.inFlight,
  };
}

function emptyViolations(): MarketplaceViolations {
  return { total: 0, byFamily: Object.fromEntries(FAMILIES.map((f) => [f, 0])) as Record<Family, number>, byScope: {} };
}

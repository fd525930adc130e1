import { createHash } from "node:crypto";
import type { ServerResponse } from "node:http";
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
import { HttpError, errorBody, sendJson, type RequestContext, type Route } from "./router";
import {
  createCallerWait,
  sendServerError,
  type CallerWait,
  type SimulatedService,
  type SimulatorOptions,
} from "./simulated-call";

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
  const marketplace = new Marketplace(options);
  return {
    routes: marketplace.routes(),
    violations: () => marketplace.stats().violations,
    stats: () => marketplace.stats(),
    reset: () => marketplace.reset(),
    failNext: (n) => marketplace.failNext(n),
    inFlight: marketplace.caller.inFlight,
  };
}

/** A page request's query, checked: the tenant and the page number. */
interface PageQuery {
  tenant: string;
  pageNumber: number;
}

/** The marketplace's state: its settings, each scope's bucket, the counters and the failures asked for. */
class Marketplace {
  private readonly timeScale: number;
  private readonly random: () => number;
  private readonly latencyMs: () => number;
  private readonly errorRate: number;
  private readonly itemsPerPage: number;
  private readonly specs: Record<Family, BucketSpec>;
  private readonly pagesOf: (tenant: string, family: Family) => number;
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private accepted = 0;
  private violations = emptyViolations();
  private failures = 0;
  readonly caller: CallerWait;

  /** Settings from `options`, their defaults otherwise; every bucket full. */
  constructor(options: MarketplaceSimulatorOptions) {
    this.timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
    const random = options.random ?? Math.random;
    this.random = random;
    this.latencyMs = options.latencyMs ?? (() => sampleMarketplaceLatencyMs(random));
    this.errorRate = options.errorRate ?? 0;
    this.itemsPerPage = options.itemsPerPage ?? 20;
    this.specs = options.buckets ?? BUCKETS;
    this.pagesOf =
      typeof options.pages === "function" ? options.pages : () => (options.pages as number | undefined) ?? 10;
    this.caller = createCallerWait(this.timeScale, log, options.slowdown);
  }

  /** Takes a token from the scope's bucket, or answers how many real ms until there is one. */
  private take(family: Family, tenant: string): { ok: true } | { ok: false; waitMs: number } {
    const { capacity, refillPerMs } = bucketRate(this.specs[family], this.timeScale, 0);
    const scope = scopeOf(family, tenant);
    const now = performance.now();
    const bucket = this.buckets.get(scope) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + (now - bucket.at) * refillPerMs);
    bucket.at = now;
    this.buckets.set(scope, bucket);
    if (this.buckets.size > 10_000) this.prune(now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, waitMs: Math.ceil((1 - bucket.tokens) / refillPerMs) };
  }

  /** Forgets buckets that have refilled: a full bucket and no bucket are the same. */
  private prune(now: number): void {
    for (const [scope, bucket] of this.buckets) {
      const family = scope.slice(0, scope.indexOf(":")) as Family;
      const { capacity, refillPerMs } = bucketRate(this.specs[family], this.timeScale, 0);
      if (bucket.tokens + (now - bucket.at) * refillPerMs >= capacity) this.buckets.delete(scope);
    }
  }

  /** The counters, a copy. */
  stats(): MarketplaceStats {
    const { accepted, violations } = this;
    return {
      accepted,
      violations: { total: violations.total, byFamily: { ...violations.byFamily }, byScope: { ...violations.byScope } },
    };
  }

  /** Clears the counters and the failures asked for, and refills every bucket. */
  reset(): void {
    this.buckets.clear();
    this.accepted = 0;
    this.violations = emptyViolations();
    this.failures = 0;
  }

  /** The next `n` accepted requests answer 500. */
  failNext(n: number): void {
    this.failures = n;
  }

  /** `GET`/`DELETE /marketplace/_stats`, then `GET /marketplace/:family`. */
  routes(): Route[] {
    return [
      { method: "GET", path: "/marketplace/_stats", handler: ({ res }) => sendJson(res, 200, this.stats()) },
      {
        method: "DELETE",
        path: "/marketplace/_stats",
        handler: ({ res }) => {
          this.reset();
          sendJson(res, 200, this.stats());
        },
      },
      { method: "GET", path: "/marketplace/:family", handler: (context) => this.page(context) },
    ];
  }

  /** One page: checked, through the tenant's bucket (429 when empty), after its latency, or a 500 or 404. */
  private async page({ req, res, url, params }: RequestContext): Promise<void> {
    const family = params.family!;
    if (!isFamily(family))
      throw new HttpError(
        404,
        `unknown endpoint family ${JSON.stringify(family)}; there are ${FAMILIES.join(", ")}`,
        "not_found",
      );
    const { tenant, pageNumber } = pageQueryOf(url);

    const taken = this.take(family, tenant);
    if (!taken.ok) {
      this.refuse(res, family, tenant, taken.waitMs);
      return;
    }
    this.accepted++;

    if (!(await this.caller.wait({ req, res }, this.latencyMs))) return;
    if (this.failures > 0 || this.random() < this.errorRate) {
      if (this.failures > 0) this.failures--;
      sendServerError(res, "The marketplace had an error while processing the request.");
      return;
    }
    const pages = this.pagesOf(tenant, family);
    if (pageNumber > pages)
      throw new HttpError(
        404,
        `page ${pageNumber} does not exist: ${tenant} has ${pages} pages of ${family}`,
        "not_found",
      );
    const body: MarketplacePage = {
      items: marketplaceItems(family, tenant, pageNumber, this.itemsPerPage),
      page: pageNumber,
      nextPage: pageNumber < pages ? pageNumber + 1 : null,
    };
    sendJson(res, 200, body);
  }

  /** Counts a violation of the scope's limit and answers it: 429 with `Retry-After` and `retry-after-ms`. */
  private refuse(res: ServerResponse, family: Family, tenant: string, waitMs: number): void {
    const { violations } = this;
    const scope = scopeOf(family, tenant);
    violations.total++;
    violations.byFamily[family]++;
    violations.byScope[scope] = (violations.byScope[scope] ?? 0) + 1;
    const spec = this.specs[family];
    log.warn({ scope, waitMs }, "rate limit exceeded");
    sendJson(
      res,
      429,
      errorBody(
        `rate limit exceeded for ${scope}: ${spec.refillPerWindow} requests per ${spec.windowMs / 1000} s; retry in ${waitMs} ms`,
        "rate_limited",
      ),
      {
        "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
        "retry-after-ms": String(waitMs),
      },
    );
  }
}

/** A page request's `tenant` (a slug, required) and `page` (a whole number from 1, default 1); a 400 otherwise. */
function pageQueryOf(url: URL): PageQuery {
  const tenant = url.searchParams.get("tenant");
  if (!tenant) throw new HttpError(400, "the tenant query parameter is required (?tenant=<slug>)");
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/.test(tenant))
    throw new HttpError(400, `not a tenant slug: ${JSON.stringify(tenant.slice(0, 100))}`);
  const pageText = url.searchParams.get("page") ?? "1";
  if (!/^[1-9][0-9]{0,8}$/.test(pageText))
    throw new HttpError(400, `page must be a whole number from 1, got ${JSON.stringify(pageText.slice(0, 20))}`);
  return { tenant, pageNumber: Number(pageText) };
}

function emptyViolations(): MarketplaceViolations {
  return { total: 0, byFamily: Object.fromEntries(FAMILIES.map((f) => [f, 0])) as Record<Family, number>, byScope: {} };
}

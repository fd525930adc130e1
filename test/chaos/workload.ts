/**
 * The work a chaos run submits, through the HTTP API as customers and operators do: imports
 * (some with bad rows), OCR batches (some with a damaged file), agent runs on both agent queues,
 * marketplace syncs, card generations and dislikes. Each accepted job is remembered with what it
 * must produce, so the checks can tell a lost or doubled item from a correct run.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { samplePdf, samplePng, sampleText, truncatedPdf } from "../../lib/documents/sample-documents";
import { FAMILIES, type Family } from "../../lib/ratelimit/buckets";
import { demoCsv } from "../../workers/demo/traffic";

export type Random = () => number;

/** Deterministic random numbers from a seed (mulberry32): a run's plan can be replayed. */
export function seeded(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const between = (lo: number, hi: number, random: Random) => lo + Math.floor(random() * (hi - lo + 1));
const pick = <T>(items: readonly T[], random: Random): T => items[Math.floor(random() * items.length)]!;

export const CHAOS_TENANTS = Array.from({ length: 12 }, (_, i) => `chaos-${String(i + 1).padStart(2, "0")}`);
/** Units granted to each tenant's pack before the run: more than the run can spend. */
export const PACK_UNITS = 500;
/** Ads per tenant: a few, so that dislikes find delivered cards. */
const ADS_PER_TENANT = 3;

export type WorkKind = "import" | "documents" | "agent" | "sync" | "generate" | "dislike";

export interface Accepted {
  jobId: string;
  work: WorkKind;
  tenant: string;
  /**
   * Imports: the rows the file has, good and bad, so the checks know what must land; `badRows`
   * the spreadsheet rows broken on purpose (any other row recorded as failed is unexpected).
   */
  rows?: { good: number; bad: number; badRows: number[] };
  /** OCR batches: files, and how many are damaged (each must end as an item failure). */
  files?: { total: number; damaged: number };
  /** Syncs: the family. */
  family?: Family;
  /** The customer's progress link, when the API gave one. */
  progressToken?: string;
}

export interface WorkloadStats {
  accepted: Accepted[];
  /** Requests answered 4xx by design (a dislike with nothing to dislike, a sync already open). */
  refused: Record<string, number>;
  /** Attempts that met a part of the system down (connection refused, 502/503) and were sent again. */
  resent: number;
  /** Requests refused with a 429 and sent again after its Retry-After. */
  throttled: number;
  /** Requests that never got an answer within the deadline. */
  gaveUp: number;
}

export function adId(tenant: string, n: number): string {
  const h = createHash("sha256").update(`chaos-ad\0${tenant}\0${n}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export class Workload {
  readonly stats: WorkloadStats = { accepted: [], refused: {}, resent: 0, throttled: 0, gaveUp: 0 };
  private readonly syncsLeft: { tenant: string; family: Family }[];
  /** Ads with a delivered card, learned from the database as the run goes (dislikes need one). */
  private readonly delivered = new Set<string>();
  private readonly dislikedAds = new Set<string>();

  constructor(
    private readonly baseUrl: string,
    private readonly operatorToken: string,
    private readonly random: Random,
    /** Only imports, of this many rows (drawn uniformly); otherwise the mixed workload with small imports. */
    private readonly importsOnly?: { rows: [number, number] },
    /** Pass one broken row off as good (the first import that has one), for the report's planted finding. */
    private plant = false,
  ) {
    this.syncsLeft = CHAOS_TENANTS.flatMap((tenant) => FAMILIES.map((family) => ({ tenant, family })));
  }

  markDelivered(ads: Iterable<string>): void {
    for (const a of ads) this.delivered.add(a);
  }

  /**
   * Sends a request until it is answered: a connection refused or reset, or a 502/503 (a part
   * restarting, the queue unreachable — the API says nothing was saved), is sent again; a 429 is
   * sent again after its Retry-After, as a client that respects it would (a refusal that outlasts
   * the deadline is answered as it came).
   */
  async send(path: string, init: () => RequestInit, operator: boolean, deadlineMs = 90_000): Promise<Response | null> {
    const until = Date.now() + deadlineMs;
    let wait = 200;
    for (;;) {
      try {
        const headers = new Headers(init().headers);
        if (operator) headers.set("authorization", `Bearer ${this.operatorToken}`);
        const res = await fetch(`${this.baseUrl}${path}`, { ...init(), headers, signal: AbortSignal.timeout(15_000) });
        const retryAfterMs = res.status === 429 ? Number(res.headers.get("retry-after")) * 1000 : Number.NaN;
        if (retryAfterMs > 0 && Date.now() + retryAfterMs < until) {
          await res.body?.cancel();
          this.stats.throttled++;
          await sleep(retryAfterMs);
          continue;
        }
        if (res.status !== 502 && res.status !== 503 && res.status !== 504) return res;
        await res.body?.cancel();
      } catch {
        /* the web process is down or restarting */
      }
      if (Date.now() > until) {
        this.stats.gaveUp++;
        return null;
      }
      this.stats.resent++;
      await sleep(wait);
      wait = Math.min(wait * 2, 2_000);
    }
  }

  async grantPacks(): Promise<void> {
    for (const tenant of CHAOS_TENANTS) {
      const res = await this.send("/api/packs", () => json({ tenant, units: PACK_UNITS }), true);
      if (res?.status !== 201) throw new Error(`granting a pack to ${tenant}: ${res?.status} ${await res?.text()}`);
    }
  }

  /** Submits one piece of work, picked by weight. */
  async submitOne(n: number): Promise<void> {
    if (this.importsOnly) return this.importFile(n);
    const r = this.random();
    if (r < 0.34) return this.importFile(n);
    if (r < 0.48) return this.documents(n);
    if (r < 0.63) return this.agentRun();
    if (r < 0.75 && this.syncsLeft.length) return this.sync();
    return this.generation();
  }

  private async accept(
    res: Response | null,
    work: WorkKind,
    tenant: string,
    extra: Partial<Accepted> = {},
  ): Promise<void> {
    if (!res) return;
    const body = (await res.json().catch(() => ({}))) as {
      jobId?: string;
      progressToken?: string;
      code?: string;
      error?: { code?: string };
    };
    // 201/202: created; 200: the open job answered (a sync sent again after its first answer was lost).
    if (res.ok && body.jobId) {
      if (!this.stats.accepted.some((a) => a.jobId === body.jobId))
        this.stats.accepted.push({
          jobId: body.jobId,
          work,
          tenant,
          ...(body.progressToken ? { progressToken: body.progressToken } : {}),
          ...extra,
        });
      return;
    }
    if (res.status >= 500)
      throw new Error(`${work} for ${tenant}: the API answered ${res.status}: ${JSON.stringify(body)}`);
    const code = `${work} ${res.status} ${body.error?.code ?? body.code ?? ""}`.trim();
    this.stats.refused[code] = (this.stats.refused[code] ?? 0) + 1;
  }

  private async importFile(n: number): Promise<void> {
    const tenant = pick(CHAOS_TENANTS, this.random);
    const [lo, hi] = this.importsOnly?.rows ?? [5, 40];
    const rows = between(lo, hi, this.random);
    const badEvery = this.random() < 0.3 ? between(4, 9, this.random) : null;
    const { bytes, badRows } = demoCsv(rows, badEvery, this.random);
    if (this.plant && badRows.length > 0) {
      this.plant = false;
      badRows.shift();
    }
    const res = await this.send(
      "/api/imports",
      () => {
        const form = new FormData();
        form.set("tenant", tenant);
        form.set("file", new Blob([new Uint8Array(bytes)], { type: "text/csv" }), `chaos-${n}.csv`);
        return { method: "POST", body: form };
      },
      false,
    );
    await this.accept(res, "import", tenant, { rows: { good: rows - badRows.length, bad: badRows.length, badRows } });
  }

  private async documents(n: number): Promise<void> {
    const tenant = pick(CHAOS_TENANTS, this.random);
    const count = between(2, 6, this.random);
    let damaged = 0;
    const files = Array.from({ length: count }, (_, i) => {
      const r = this.random();
      if (r < 0.1) {
        damaged++;
        return { name: `scan-${n}-${i + 1}.pdf`, bytes: truncatedPdf(), type: "application/pdf" };
      }
      if (r < 0.55)
        return {
          name: `invoice-${n}-${i + 1}.pdf`,
          bytes: samplePdf([`Invoice ${n}-${i + 1}`, `Total due: ${(this.random() * 900).toFixed(2)} EUR`]),
          type: "application/pdf",
        };
      if (r < 0.8) return { name: `receipt-${n}-${i + 1}.png`, bytes: samplePng(240, 160), type: "image/png" };
      return { name: `note-${n}-${i + 1}.txt`, bytes: sampleText(), type: "text/plain" };
    });
    const res = await this.send(
      "/api/documents",
      () => {
        const form = new FormData();
        form.set("tenant", tenant);
        for (const f of files) form.append("files", new Blob([new Uint8Array(f.bytes)], { type: f.type }), f.name);
        return { method: "POST", body: form };
      },
      false,
    );
    await this.accept(res, "documents", tenant, { files: { total: count, damaged } });
  }

  private async agentRun(): Promise<void> {
    const tenant = pick(CHAOS_TENANTS, this.random);
    const interactive = this.random() < 0.5;
    const steps = interactive ? between(2, 5, this.random) : between(5, 14, this.random);
    const res = await this.send(
      "/api/agent-runs",
      () => json({ tenant, task: "Reconcile the chaos ledger", steps, interactive }),
      true,
    );
    await this.accept(res, "agent", tenant);
  }

  private async sync(): Promise<void> {
    const { tenant, family } = this.syncsLeft.splice(Math.floor(this.random() * this.syncsLeft.length), 1)[0]!;
    const res = await this.send("/api/syncs", () => json({ tenant, family }), true);
    await this.accept(res, "sync", tenant, { family });
  }

  private async generation(): Promise<void> {
    const candidates = [...this.delivered].filter((a) => !this.dislikedAds.has(a));
    if (candidates.length && this.random() < 0.25) {
      const [tenant, ad] = pick(candidates, this.random).split("/") as [string, string];
      this.dislikedAds.add(`${tenant}/${ad}`);
      const res = await this.send("/api/generations", () => json({ tenant, adId: ad, kind: "dislike" }), true);
      return this.accept(res, "dislike", tenant);
    }
    const tenant = pick(CHAOS_TENANTS, this.random);
    const ad = adId(tenant, between(1, ADS_PER_TENANT, this.random));
    const res = await this.send("/api/generations", () => json({ tenant, adId: ad, kind: "generate" }), true);
    await this.accept(res, "generate", tenant);
  }
}

function json(body: unknown): RequestInit {
  return { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
}

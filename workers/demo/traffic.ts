import { createAgentRun } from "@/lib/agents/create-run";
import { KINDS, type JobKind } from "@/lib/catalog/catalog";
import { createDocumentBatch } from "@/lib/documents/create-batch";
import { samplePdf, samplePng, sampleText, truncatedPdf } from "@/lib/documents/sample-documents";
import { createImport } from "@/lib/imports/create-import";
import type { Logger } from "@/lib/log";
import { FAMILIES } from "@/lib/ratelimit/buckets";
import { createGeneration } from "@/lib/generations/create-generation";
import { getPack, grantUnits } from "@/lib/quota/packs";
import { startSync } from "@/lib/syncs/create-sync";
import { scaled, sleep } from "@/lib/time";
import { distinctWord } from "@/lib/format/distinct-word";

/**
 * Demo traffic: a steady mix of the work the platform runs, so a fresh `npm start` shows every
 * page with live data — imports (some with bad rows, now and then one larger than its budget's
 * worth, which splits itself), OCR
 * batches, agent runs on both agent queues, marketplace syncs for twenty tenants hitting their
 * limits, card generations (with dislikes) against the slow image provider. Every interval is
 * production time, scaled like everything else.
 */
export const DEMO_TENANTS = Array.from({ length: 20 }, (_, i) => `demo-${String(i + 1).padStart(2, "0")}`);
/** Production time between two pieces of work. */
export const DEMO_INTERVAL_MS = 8_000;
/** A tenant's pack is topped up to this many units when it runs low. */
const PACK_UNITS = 200;

const COUNTERPARTIES = [
  "REWE Markt",
  "Uber BV",
  "DB Bahn",
  "ACME GmbH salary",
  "Amazon EU",
  "Stadtwerke Nord",
  "Pizzeria Roma",
  "Netflix",
  "Lufthansa",
];
const TASKS = [
  "Reconcile March card payments",
  "Summarise open invoices over 1,000 EUR",
  "Convert last week's expenses to EUR",
  "Find duplicate supplier payments",
];

type Random = () => number;

/**
 * The sizes of the demo's imports, sized to what the model provider allows: at its defaults (32
 * calls of 8 rows, ≈ 12.8 s a call) imports get ≈ 20 rows a production second. One import
 * arrives every ≈ 26 s (weight 5 of 16, one piece of work every 8 s) with 261 rows on average —
 * ≈ 10 rows/s, half the provider, leaving the rest for agent runs and document passes, so the
 * queues do not grow however long the demo runs.
 */
export const DEMO_IMPORT_SIZES = [
  {
    share: 0.01,
    rows: [12_000, 12_000],
    name: "year",
    bad: false,
    why: "a year of transactions: more than one 10 min budget's worth, so it splits itself into parts, one after another",
  },
  { share: 0.05, rows: [1_500, 1_500], name: "quarter", bad: false, why: "a quarter: about 2 min alone" },
  { share: 0.2, rows: [20, 120], name: "statement", bad: true, why: "a month with broken rows, reported row by row" },
  { share: 0.74, rows: [20, 120], name: "statement", bad: false, why: "a month" },
] as const;

/** The import of a roll of the dice in [0, 1). */
export function importSize(roll: number): (typeof DEMO_IMPORT_SIZES)[number] {
  let x = roll;
  for (const size of DEMO_IMPORT_SIZES) {
    x -= size.share;
    if (x < 0) return size;
  }
  return DEMO_IMPORT_SIZES.at(-1)!;
}
const pick = <T>(items: readonly T[], random: Random): T => items[Math.floor(random() * items.length)]!;
const between = (lo: number, hi: number, random: Random) => lo + Math.floor(random() * (hi - lo + 1));

/**
 * Steps of the demo's interactive agent runs: a person waits on them with a 60 s budget, and the
 * model's calls have a median of 5.5 s and a p99 of 35 s, so the sum of n calls passes the budget
 * in 0.2 % of runs for one step, 0.7 % for two, 1.9 % for three and 18 % for six (2–6 steps timed
 * out 4 runs of 33 in a demo, burning the 1 % objective). One or two steps keep a healthy demo
 * inside its objective (workers/demo/traffic-capacity.test.ts holds it).
 */
export const DEMO_INTERACTIVE_STEPS: [number, number] = [1, 2];
/** Steps of the demo's batch agent runs: their budget is generous. */
const DEMO_BATCH_STEPS: [number, number] = [8, 24];

/** A generated CSV, and the spreadsheet rows (the header is row 1) it broke on purpose. */
export interface DemoCsv {
  bytes: Uint8Array;
  badRows: number[];
}

/**
 * A bank-transaction CSV of `rows` rows; every `badEvery`-th row broken as customers break them,
 * and only those: every other row passes the import's validation (an amount is drawn in whole
 * cents and is never zero — a drawn -0.004 once printed as "-0.00", a row refused as "amount is
 * zero" that the chaos run counted as good).
 */
export function demoCsv(rows: number, badEvery: number | null, random: Random): DemoCsv {
  const lines = ["date,amount,currency,counterparty,description"];
  const badRows: number[] = [];
  for (let i = 1; i <= rows; i++) {
    if (badEvery && i % badEvery === 0) {
      badRows.push(i + 1);
      lines.push(
        pick(
          [
            "2026-02-30,12.00,EUR,REWE Markt,impossible date",
            "2026-01-05,twelve,EUR,Uber BV,amount in words",
            "2026-01-05,12.00,XYZ,DB Bahn,unknown currency",
          ],
          random,
        ),
      );
      continue;
    }
    const cents = Math.floor(random() * 40_000) - 30_000;
    const amount = ((cents === 0 ? 100 : cents) / 100).toFixed(2);
    lines.push(
      `2026-03-${String(between(1, 28, random)).padStart(2, "0")},${amount},EUR,${pick(COUNTERPARTIES, random)},demo row ${distinctWord(i)}`,
    );
  }
  return { bytes: new TextEncoder().encode(lines.join("\n")), badRows };
}

export interface DemoAction {
  /** The job kind it starts. */
  name: JobKind;
  weight: number;
  run: (random: Random) => Promise<string>;
}

/** The kinds the catalog puts in the demo's random mix (a numeric `demo.weight`). */
type DemoKind = { [K in JobKind]: (typeof KINDS)[K]["demo"]["weight"] extends number ? K : never }[JobKind];

/**
 * How the demo starts each kind of the mix, through the same functions the API calls. Typed by
 * the catalog: a kind given a demo weight there must have a starter here; how often each runs is
 * the catalog's weight.
 */
const DEMO_STARTERS: Record<DemoKind, (random: Random) => Promise<string>> = {
  csv_import: async (random) => {
    const tenant = pick(DEMO_TENANTS, random);
    const size = importSize(random());
    const rows = between(size.rows[0], size.rows[1], random);
    const badEvery = size.bad ? between(7, 15, random) : null;
    const r = await createImport({
      tenant,
      filename: `${size.name}-${between(1000, 9999, random)}.csv`,
      bytes: demoCsv(rows, badEvery, random).bytes,
    });
    return r.type === "created" ? `import of ${rows} rows for ${tenant} (${size.why})` : `import refused: ${r.message}`;
  },
  bulk_ocr: async (random) => {
    const tenant = pick(DEMO_TENANTS, random);
    const n = between(3, 12, random);
    const files = Array.from({ length: n }, (_, i) => {
      const kind = random();
      if (kind < 0.05) return { filename: `scan-${i + 1}.pdf`, bytes: truncatedPdf() };
      if (kind < 0.5)
        return {
          filename: `invoice-${i + 1}.pdf`,
          bytes: samplePdf([
            `Invoice ${between(1, 999, random)} from ${pick(COUNTERPARTIES, random)}`,
            `Total due: ${(random() * 2000).toFixed(2)} EUR`,
          ]),
        };
      if (kind < 0.8) return { filename: `receipt-${i + 1}.png`, bytes: samplePng(320, 200) };
      return { filename: `contract-${i + 1}.txt`, bytes: sampleText() };
    });
    const r = await createDocumentBatch({ tenant, files });
    return r.type === "created" ? `OCR batch of ${n} documents for ${tenant}` : `OCR batch refused: ${r.message}`;
  },
  agent_run: async (random) => {
    const interactive = random() < 0.6;
    const tenant = pick(DEMO_TENANTS, random);
    const [lo, hi] = interactive ? DEMO_INTERACTIVE_STEPS : DEMO_BATCH_STEPS;
    const steps = between(lo, hi, random);
    await createAgentRun({ tenant, task: pick(TASKS, random), steps, interactive });
    return `${interactive ? "interactive" : "batch"} agent run of ${steps} steps for ${tenant}`;
  },
  marketplace_sync: async (random) => {
    const tenant = pick(DEMO_TENANTS, random);
    const family = pick(FAMILIES, random);
    const r = await startSync({ tenant, family });
    return r.existing ? `sync ${family}:${tenant} already ${r.status}` : `sync ${family}:${tenant}`;
  },
  card_generation: async (random) => {
    const tenant = pick(DEMO_TENANTS, random);
    const pack = await getPack(tenant);
    if (!pack || pack.remaining < 5) await grantUnits({ tenant, units: PACK_UNITS });
    // A handful of ads per tenant, so dislikes find cards to regenerate.
    const adId = `00000000-0000-4000-8000-${String(DEMO_TENANTS.indexOf(tenant)).padStart(6, "0")}${String(between(1, 5, random)).padStart(6, "0")}`;
    const kind = random() < 0.2 ? "dislike" : "generate";
    try {
      await createGeneration({ tenant, adId, kind });
      return `${kind} card for ${tenant}`;
    } catch (err) {
      // A dislike of an ad without a card yet (or one already used) is refused: normal here.
      return `${kind} refused for ${tenant}: ${(err as Error).message}`;
    }
  },
};

/** Each piece of work the demo starts, with how often (the catalog's relative weight). */
export const DEMO_ACTIONS: readonly DemoAction[] = (Object.keys(DEMO_STARTERS) as DemoKind[]).map((kind) => ({
  name: kind,
  weight: KINDS[kind].demo.weight,
  run: DEMO_STARTERS[kind],
}));

/** Picks the next action by weight. */
export function nextAction(random: Random, actions: readonly DemoAction[] = DEMO_ACTIONS): DemoAction {
  const total = actions.reduce((s, a) => s + a.weight, 0);
  let x = random() * total;
  for (const a of actions) {
    x -= a.weight;
    if (x < 0) return a;
  }
  return actions.at(-1)!;
}

/**
 * Runs the demo until `signal` aborts: first one of each kind of work (and a sync per family for
 * five tenants, so the limiter has buckets to show at once), then one piece every interval.
 */
export async function runDemoTraffic(options: {
  log: Logger;
  signal: AbortSignal;
  random?: Random;
  intervalMs?: number;
}): Promise<void> {
  const { log, signal } = options;
  const random = options.random ?? Math.random;
  const intervalMs = options.intervalMs ?? Math.max(250, scaled(DEMO_INTERVAL_MS));
  const attempt = async (action: DemoAction) => {
    try {
      log.info({ action: action.name }, await action.run(random));
    } catch (err) {
      log.warn({ err, action: action.name }, "demo work could not be started");
    }
  };
  for (const action of DEMO_ACTIONS) await attempt(action);
  for (const tenant of DEMO_TENANTS.slice(0, 5)) {
    for (const family of FAMILIES)
      await attempt({
        name: "marketplace_sync",
        weight: 0,
        run: async () => {
          await startSync({ tenant, family });
          return `sync ${family}:${tenant}`;
        },
      });
  }
  while (!signal.aborted) {
    await sleep(intervalMs, signal).catch(() => undefined);
    if (!signal.aborted) await attempt(nextAction(random));
  }
}

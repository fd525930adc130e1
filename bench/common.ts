/**
 * What the import-driven benchmarks (bench/import.ts, bench/fairness.ts) share: their flags, a
 * database of their own beside the configured one, and the bank-export CSV they upload.
 */
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { parseEnv } from "../lib/env";

/** `--scale 0.05` → 0.05; undefined without the flag (or with a value that is not a positive number). */
export function flagNumber(name: string): number | undefined {
  const i = process.argv.indexOf(name);
  const value = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The configured `DATABASE_URL` with another database name: the bench's own, created and dropped by it. */
export function benchDatabaseUrl(database: string): string {
  const url = new URL(parseEnv(process.env).DATABASE_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Counterparties the simulated model knows, and some it does not. */
const COUNTERPARTIES = ["REWE Markt", "Deutsche Bahn", "Netflix", "Stadtwerke Berlin", "Amazon EU", "Hausverwaltung Miete", "Pizzeria Napoli", "Apotheke am Markt", "Lufthansa", "Kiosk 24"];

/** A bank export of `rows` rows (every one valid), as `createImport` takes an upload. */
export function csvOf(rows: number): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++) {
    const date = `2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}`;
    lines.push(`${date},-${(i % 400) + 1}.${String(i % 100).padStart(2, "0")},EUR,${COUNTERPARTIES[i % COUNTERPARTIES.length]},card payment ${i}`);
  }
  return new TextEncoder().encode(lines.join("\n"));
}

import pg from "pg";
import { env } from "@/lib/env";

export interface TableActivity {
  table: string;
  seqScansPerS: number;
  idxScansPerS: number;
  rowsReadBySeqScansPerS: number;
  insertsPerS: number;
  updatesPerS: number;
  liveRows: number;
}

interface Snapshot {
  relname: string;
  seq_scan: string;
  seq_tup_read: string;
  idx_scan: string | null;
  n_tup_ins: string;
  n_tup_upd: string;
  n_live_tup: string;
}

const SQL = `SELECT relname, seq_scan, seq_tup_read, idx_scan, n_tup_ins, n_tup_upd, n_live_tup FROM pg_stat_user_tables WHERE schemaname = 'public'`;

/**
 * Table activity per second from two snapshots of `pg_stat_user_tables`, `intervalMs` apart. Each
 * snapshot is its own autocommit statement: inside one transaction PostgreSQL 15 freezes the
 * statistics snapshot and the difference would be zero. Counters are those the server has
 * flushed (backends report at most about once a second), so short windows lag a little.
 */
export async function sampleTableActivity(intervalMs = 2000): Promise<{ intervalMs: number; tables: TableActivity[] }> {
  const client = new pg.Client({ connectionString: env().DATABASE_URL });
  await client.connect();
  try {
    const first = (await client.query<Snapshot>(SQL)).rows;
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, intervalMs));
    const second = (await client.query<Snapshot>(SQL)).rows;
    const seconds = (Date.now() - t0) / 1000;
    const before = new Map(first.map((r) => [r.relname, r]));
    const rate = (a: string | null | undefined, b: string | null | undefined) =>
      Math.max(0, (Number(b ?? 0) - Number(a ?? 0)) / seconds);
    const tables = second
      .filter((r) => r.relname !== "_prisma_migrations")
      .map((r) => {
        const p = before.get(r.relname);
        return {
          table: r.relname,
          seqScansPerS: rate(p?.seq_scan, r.seq_scan),
          idxScansPerS: rate(p?.idx_scan, r.idx_scan),
          rowsReadBySeqScansPerS: rate(p?.seq_tup_read, r.seq_tup_read),
          insertsPerS: rate(p?.n_tup_ins, r.n_tup_ins),
          updatesPerS: rate(p?.n_tup_upd, r.n_tup_upd),
          liveRows: Number(r.n_live_tup),
        };
      })
      .sort(
        (a, b) => b.seqScansPerS - a.seqScansPerS || b.idxScansPerS - a.idxScansPerS || a.table.localeCompare(b.table),
      );
    return { intervalMs: Math.round(seconds * 1000), tables };
  } finally {
    await client.end();
  }
}

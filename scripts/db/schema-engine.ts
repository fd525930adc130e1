import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { PrismaPg } from "@prisma/adapter-pg";
import {
  bindMigrationAwareSqlAdapterFactory,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
} from "@prisma/driver-adapter-utils";
import type { MigrationList, SchemaEngine } from "@prisma/schema-engine-wasm";
import * as bg from "@prisma/schema-engine-wasm/schema_engine_bg";
import pg from "pg";
import { listMigrations, maintenanceUrl, quoteIdent } from "./migrate";

/**
 * Prisma's schema engine, compiled to WebAssembly and talking to PostgreSQL through adapter-pg:
 * the offline replacement for the native engine `prisma migrate dev` would download.
 * Only the dev tool create-migration.ts uses it; deploys use migrate.ts.
 */

/**
 * The engine reads catalog columns of type "char" (OID 18), which adapter-pg cannot map
 * ("Column type 'char' could not be deserialized"). Their values arrive as strings anyway, so
 * we report them as text (OID 25). This patches pg for the whole process: call it only in the
 * migration tool, never in the app.
 */
let charPatched = false;
function reportCharColumnsAsText(): void {
  if (charPatched) return;
  charPatched = true;
  type Result = { fields?: { dataTypeID: number }[] };
  const fix = (result: unknown): unknown => {
    for (const r of (Array.isArray(result) ? result : [result]) as Result[]) {
      for (const field of r?.fields ?? []) if (field.dataTypeID === 18) field.dataTypeID = 25;
    }
    return result;
  };
  const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    // Callback form (what pg.Pool uses): wrap the callback.
    const last = args.at(-1);
    if (typeof last === "function") {
      args[args.length - 1] = (error: unknown, result: unknown) => last(error, error ? result : fix(result));
      return original.apply(this, args);
    }
    // Promise form.
    const returned = original.apply(this, args);
    return returned instanceof Promise ? returned.then(fix) : returned;
  } as typeof pg.Client.prototype.query;
}

/**
 * adapter-pg's own connectToShadowDb either reuses the main database (given a URL) or leaks
 * shadow databases, so ours creates `prisma_shadow_<uuid>` and drops it when disposed.
 */
function adapterFactory(databaseUrl: string): SqlMigrationAwareDriverAdapterFactory & {
  disposeAll(): Promise<void>;
} {
  const main = new PrismaPg({ connectionString: databaseUrl });
  const open = new Set<SqlDriverAdapter>();

  // The engine does not always dispose what it opened; we close leftovers at the end.
  const track = (adapter: SqlDriverAdapter, onDispose?: () => Promise<void>): SqlDriverAdapter => {
    // adapter-pg's executeScript splits scripts at every ";", even inside comments, strings and
    // function bodies. Sent whole (simple query protocol: no parameters), a migration runs
    // exactly as PostgreSQL, migrate.ts and Prisma's native engine run it.
    adapter.executeScript = async (script) => {
      await adapter.executeRaw({ sql: script, args: [], argTypes: [] });
    };
    const dispose = adapter.dispose.bind(adapter);
    adapter.dispose = async () => {
      if (!open.delete(adapter)) return;
      await dispose();
      await onDispose?.();
    };
    open.add(adapter);
    return adapter;
  };

  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: maintenanceUrl(databaseUrl) });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };

  return {
    provider: main.provider,
    adapterName: main.adapterName,
    connect: async () => track(await main.connect()),
    connectToShadowDb: async () => {
      const name = `prisma_shadow_${randomUUID().replaceAll("-", "")}`;
      await admin(`CREATE DATABASE ${quoteIdent(name)}`);
      const url = new URL(databaseUrl);
      url.pathname = `/${name}`;
      const adapter = await new PrismaPg({ connectionString: url.toString() }).connect();
      // FORCE: the engine may still hold a connection to it when it lets go.
      return track(adapter, () => admin(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`));
    },
    disposeAll: async () => {
      for (const adapter of [...open]) await adapter.dispose().catch(() => {});
    },
  };
}

/** The migrations folder in the shape the engine expects. */
export async function migrationsList(dir: string): Promise<MigrationList> {
  const lockfile = path.join(dir, "migration_lock.toml");
  return {
    baseDir: dir,
    lockfile: { path: "migration_lock.toml", content: await readFile(lockfile, "utf8").catch(() => null) },
    shadowDbInitScript: "",
    migrationDirectories: (await listMigrations(dir)).map((m) => ({
      path: m.name,
      migrationFile: { path: "migration.sql", content: { tag: "ok" as const, value: m.sql } },
    })),
  };
}

async function loadWasm(): Promise<void> {
  // Node 20 cannot `import` a .wasm module, so we instantiate it and hand it to the JS glue.
  const glue = createRequire(import.meta.url).resolve("@prisma/schema-engine-wasm/schema_engine_bg");
  const bytes = await readFile(path.join(path.dirname(glue), "schema_engine_bg.wasm"));
  const { instance } = await WebAssembly.instantiate(bytes, { "./schema_engine_bg.js": bg });
  const exports = instance.exports as WebAssembly.Exports & { __wbindgen_start(): void };
  bg.__wbg_set_wasm(exports);
  exports.__wbindgen_start();
}

let wasmLoaded: Promise<void> | undefined;

/** Runs `fn` with an engine connected to `databaseUrl` and knowing the schema, then cleans up. */
export async function withSchemaEngine<T>(
  options: { databaseUrl: string; schemaPath: string; log?: (line: string) => void },
  fn: (engine: SchemaEngine, schema: { files: { path: string; content: string }[] }) => Promise<T>,
): Promise<T> {
  reportCharColumnsAsText();
  wasmLoaded ??= loadWasm();
  await wasmLoaded;
  const content = await readFile(options.schemaPath, "utf8");
  const factory = adapterFactory(options.databaseUrl);
  const engine = await bg.SchemaEngine.new(
    { datamodels: [[options.schemaPath, content]] },
    (line: string) => options.log?.(line),
    bindMigrationAwareSqlAdapterFactory(factory),
  );
  try {
    return await fn(engine, { files: [{ path: options.schemaPath, content }] });
  } finally {
    engine.free();
    await factory.disposeAll();
  }
}

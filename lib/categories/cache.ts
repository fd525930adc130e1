import pg from "pg";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";

/** The Category reference table, as every item of every job needs it. */
export interface Category {
  id: number;
  slug: string;
  name: string;
}

const log = logger("categories");
const CHANNEL = "bounded_category_changed";

const state = globalThis as unknown as {
  __boundedCategories?: Promise<Category[]>;
  __boundedCategoryListener?: pg.Client;
};

/**
 * The categories, read once per process and kept until a change is announced. A trigger on the
 * table NOTIFYs every change, however it was made; `listenForCategoryChanges` drops the cache.
 */
export function getCategories(): Promise<Category[]> {
  state.__boundedCategories ??= db()
    .category.findMany({ select: { id: true, slug: true, name: true }, orderBy: { id: "asc" } })
    .catch((err) => {
      state.__boundedCategories = undefined;
      throw err;
    });
  return state.__boundedCategories;
}

function invalidateCategories(): void {
  state.__boundedCategories = undefined;
}

/**
 * LISTENs for changes on a connection of its own. While the connection is down the cache is not
 * trusted (it is dropped on every reconnect), so a missed notification cannot leave it stale.
 */
export async function listenForCategoryChanges(): Promise<() => Promise<void>> {
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: env().DATABASE_URL });
    client.on("notification", (msg) => {
      if (msg.channel === CHANNEL) {
        invalidateCategories();
        log.info("categories changed; cache dropped");
      }
    });
    client.on("error", (err) => {
      log.warn({ err: err.message }, "category listener lost its connection; reconnecting");
      invalidateCategories();
      void client.end().catch(() => undefined);
      if (!stopped) retry = setTimeout(() => void connect().catch(() => undefined), 1000);
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    invalidateCategories();
    state.__boundedCategoryListener = client;
  };
  await connect();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    await state.__boundedCategoryListener?.end().catch(() => undefined);
    state.__boundedCategoryListener = undefined;
  };
}

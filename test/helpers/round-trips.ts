import pg from "pg";

/** The round trips `work` makes to PostgreSQL, every pooled connection counted, by their statement's text. */
export async function roundTrips(work: () => Promise<void>): Promise<string[]> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const real = proto.query;
  const texts: string[] = [];
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string };
    texts.push(typeof first === "string" ? first : (first.text ?? ""));
    return real.apply(this, args);
  };
  try {
    await work();
  } finally {
    proto.query = real;
  }
  return texts;
}

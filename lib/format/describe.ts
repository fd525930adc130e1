/** Text from an outside service or a network error, short enough for a log line or a message. */

/** The first 200 characters of a body, whitespace collapsed. */
export function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}…` : flat;
}

/** An error in one line; Node puts the useful part (ECONNREFUSED, ECONNRESET) in the code or the cause. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code ?? (err.cause as { code?: unknown } | undefined)?.code;
  const text = `${err.name}: ${err.message}`;
  return typeof code === "string" && !text.includes(code) ? `${text} (${code})` : text;
}

/**
 * Where to go after signing in: only paths of this site, never another. The value is parsed as a
 * browser would (browsers drop tabs and newlines and read `\` as `/`, which turns `/\t/evil` into
 * `//evil`), so anything with control characters or backslashes is refused outright.
 */
export function safeNext(value: unknown): string {
  const next = typeof value === "string" ? value : "/";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (!next.startsWith("/") || /[\u0000-\u001f\u007f\\]/.test(next)) return "/";
  const base = "http://bounded.invalid";
  const url = new URL(next, base);
  // Dot segments are resolved here, so `/.//evil` comes out as `//evil`: a path that a browser
  // would read as another host is refused too.
  if (url.origin !== base || url.pathname.startsWith("//")) return "/";
  return `${url.pathname}${url.search}${url.hash}`;
}

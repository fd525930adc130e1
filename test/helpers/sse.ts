/** One server-sent event as a test reads it. */
export interface ServerSentEvent {
  event: string;
  id: string | null;
  data: string;
}

/**
 * Reads a server-sent events body event by event: `next()` gives the next event (`retry:` and
 * comment blocks skipped), or null once the stream has ended. The body is asked for on the first
 * read, so a response still on its way may be passed as a promise.
 */
export function eventReader(body: () => Promise<ReadableStream<Uint8Array>>): {
  next(): Promise<ServerSentEvent | null>;
} {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const decoder = new TextDecoder();
  let buffer = "";
  const next = async (): Promise<ServerSentEvent | null> => {
    reader ??= (await body()).getReader();
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const field = (name: string) =>
          block
            .split("\n")
            .find((l) => l.startsWith(`${name}: `))
            ?.slice(name.length + 2) ?? null;
        const data = field("data");
        if (data !== null) return { event: field("event") ?? "message", id: field("id"), data };
        continue;
      }
      const { value, done } = await reader.read();
      if (done) return null;
      buffer += decoder.decode(value, { stream: true });
    }
  };
  return { next };
}

import net from "node:net";
import { performance } from "node:perf_hooks";

/**
 * The simulated pages of `bench:progress`, as cheap to run as an HTTP/1.1 client can be. A real
 * page runs in its customer's browser, on another machine; here its client shares the two cores
 * the measured import runs on, so what the client itself spends is load the bench adds, not load
 * the system under test causes. Each watcher holds one socket and reads only what it measures (a
 * poll's status and ETag, a change's `updatedAt`). Node's `http` client, used before, spent about
 * twice the CPU on the same traffic (mostly its request and agent objects), which slowed the
 * import it was measuring.
 */

const HEAD_END = Buffer.from("\r\n\r\n");
const CRLF = Buffer.from("\r\n");
const LAST_CHUNK = Buffer.from("\r\n0\r\n\r\n");
const EVENT_END = Buffer.from("\n\n");
const PROGRESS_EVENT = Buffer.from("event: progress\n");
const ENDED = Buffer.from('"terminal":true');
const UPDATED_AT = Buffer.from('"updatedAt":"');
const QUOTE = 0x22;

/** A request's head: the request line and the given headers (a null value leaves its header out). */
function requestHead(port: number, pathname: string, headers: Record<string, string | null>): string {
  let head = `GET ${pathname} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`;
  for (const [name, value] of Object.entries(headers)) if (value !== null) head += `${name}: ${value}\r\n`;
  return `${head}\r\n`;
}

/**
 * One kept-alive connection that sends one request at a time and reads its answer's status and
 * ETag: a body is waited for (its Content-Length, or chunks up to the last) and skipped. A broken
 * connection answers status 0 and the next request opens a new one.
 */
class KeptAliveClient {
  private socket: net.Socket | null = null;
  private buffer: Buffer | null = null;
  private waiting: ((answer: { status: number; etag: string | null }) => void) | null = null;

  constructor(private readonly port: number) {}

  request(head: string): Promise<{ status: number; etag: string | null }> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.buffer = null;
      this.connection().write(head);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private connection(): net.Socket {
    if (this.socket) return this.socket;
    const socket = net.connect(this.port, "127.0.0.1");
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    const broken = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.settle({ status: 0, etag: null });
    };
    socket.on("error", broken);
    socket.on("close", broken);
    this.socket = socket;
    return socket;
  }

  private settle(answer: { status: number; etag: string | null }): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(answer);
  }

  private read(chunk: Buffer): void {
    const buffer = this.buffer ? Buffer.concat([this.buffer, chunk]) : chunk;
    this.buffer = buffer;
    const end = buffer.indexOf(HEAD_END);
    if (end < 0) return;
    const head = buffer.toString("latin1", 0, end);
    const status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    const complete =
      status === 304 || status === 204
        ? true
        : length
          ? buffer.length >= end + HEAD_END.length + Number(length[1])
          : /\r\ntransfer-encoding: *chunked/i.test(head)
            ? buffer.indexOf(LAST_CHUNK, end) >= 0
            : true;
    if (!complete) return;
    this.buffer = null;
    if (/\r\nconnection: *close/i.test(head)) this.close();
    this.settle({ status, etag: /\r\netag: *([^\r]*)/i.exec(head)?.[1] ?? null });
  }
}

/**
 * A page polling its job's answer every `everyMs` with `If-None-Match`, as the progress page does
 * when it has no stream, until `stopped()`. `pathOf()` is read before each poll (the job watched
 * may change; the ETag is then forgotten). Each answer's status and latency go to `onAnswer`.
 */
export async function pollingWatcher(options: {
  port: number;
  address: string;
  everyMs: number;
  pathOf: () => string;
  stopped: () => boolean;
  onAnswer: (status: number, ms: number) => void;
}): Promise<void> {
  const client = new KeptAliveClient(options.port);
  let etag: string | null = null;
  let pathname = options.pathOf();
  try {
    while (!options.stopped()) {
      if (options.pathOf() !== pathname) {
        pathname = options.pathOf();
        etag = null;
      }
      const started = performance.now();
      const answer = await client.request(
        requestHead(options.port, pathname, { "X-Forwarded-For": options.address, "If-None-Match": etag }),
      );
      options.onAnswer(answer.status, performance.now() - started);
      etag = answer.etag ?? etag;
      await new Promise((resolve) => setTimeout(resolve, options.everyMs));
    }
  } finally {
    client.close();
  }
}

/**
 * A decoder of a chunked body, fed the bytes as they come: returns the body's bytes among them
 * (chunk sizes and their line ends taken out; a size line split across reads is kept for the next).
 */
function dechunker(): (bytes: Buffer) => Buffer {
  let carried: Buffer | null = null;
  /** Bytes of the current chunk still to come, then the CRLF that ends it. */
  let left = 0;
  let lineEnd = 0;
  return (bytes) => {
    const buffer = carried ? Buffer.concat([carried, bytes]) : bytes;
    carried = null;
    const out: Buffer[] = [];
    let i = 0;
    while (i < buffer.length) {
      if (left > 0) {
        const take = Math.min(left, buffer.length - i);
        out.push(buffer.subarray(i, i + take));
        i += take;
        left -= take;
        if (left === 0) lineEnd = 2;
      } else if (lineEnd > 0) {
        const skip = Math.min(lineEnd, buffer.length - i);
        i += skip;
        lineEnd -= skip;
      } else {
        const eol = buffer.indexOf(CRLF, i);
        if (eol < 0) {
          carried = buffer.subarray(i);
          break;
        }
        left = Number.parseInt(buffer.toString("latin1", i, eol), 16);
        i = eol + CRLF.length;
        // The last chunk (size 0): the body is over.
        if (!(left > 0)) break;
      }
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  };
}

/**
 * A page holding its job's event stream: for each change it is sent (every `progress` event after
 * the first, which is the answer as it stood when the stream opened, and before the ended one),
 * `onChange` gets the answer's `updatedAt` and the moment the bytes arrived, taken before this
 * process reads them. `opened` resolves at the first bytes of the answer (or its refusal).
 */
export function streamWatcher(options: {
  port: number;
  pathname: string;
  address: string;
  onChange: (updatedAt: number, at: number) => void;
}): { close(): void; opened: Promise<void> } {
  let opened!: () => void;
  const ready = new Promise<void>((resolve) => (opened = resolve));
  const socket = net.connect(options.port, "127.0.0.1");
  socket.setNoDelay(true);
  let head: Buffer | null = Buffer.alloc(0);
  let body: ((bytes: Buffer) => Buffer) | null = null;
  let pending: Buffer | null = null;
  let events = 0;
  const readEvents = (bytes: Buffer, at: number) => {
    const buffer = pending ? Buffer.concat([pending, bytes]) : bytes;
    let from = 0;
    for (let end = buffer.indexOf(EVENT_END); end >= 0; end = buffer.indexOf(EVENT_END, from)) {
      const block = buffer.subarray(from, end);
      from = end + EVENT_END.length;
      if (block.indexOf(PROGRESS_EVENT) < 0 || events++ === 0 || block.indexOf(ENDED) >= 0) continue;
      const start = block.indexOf(UPDATED_AT);
      if (start < 0) continue;
      const valueStart = start + UPDATED_AT.length;
      const updatedAt = Date.parse(block.toString("latin1", valueStart, block.indexOf(QUOTE, valueStart)));
      if (Number.isFinite(updatedAt)) options.onChange(updatedAt, at);
    }
    pending = from < buffer.length ? buffer.subarray(from) : null;
  };
  socket.on("data", (chunk: Buffer) => {
    // When the change arrived, before this process spends anything on reading it.
    const at = Date.now();
    if (head === null) return readEvents(body!(chunk), at);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf(HEAD_END);
    if (end < 0) return;
    const text = head.toString("latin1", 0, end);
    const status = Number(text.slice(9, 12));
    opened();
    if (status !== 200) {
      console.error(`stream from ${options.address}: ${status}`);
      socket.destroy();
      return;
    }
    body = /\r\ntransfer-encoding: *chunked/i.test(text) ? dechunker() : (bytes) => bytes;
    const rest = head.subarray(end + HEAD_END.length);
    head = null;
    if (rest.length > 0) readEvents(body(rest), at);
  });
  socket.on("error", () => opened());
  socket.on("close", () => opened());
  socket.write(
    requestHead(options.port, options.pathname, {
      Accept: "text/event-stream",
      "X-Forwarded-For": options.address,
    }),
  );
  return { close: () => socket.destroy(), opened: ready };
}

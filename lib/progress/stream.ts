import { errorResponse } from "@/lib/http/api";
import { progressLinkNotFoundMessage } from "@/lib/jobs/messages";
import { watch } from "./hub";
import { ensureProgressListener } from "./listener";
import { getProgressSnapshot, type ProgressSnapshot, readStoredSnapshot } from "./snapshot";

/**
 * Open streams one address may hold in one web process. A customer keeps a few tabs open, an
 * office behind one address a few dozen; beyond that a caller is answered 429 and its page checks
 * by polling instead, which is cheap (a 304 from memory: ./front-door.ts).
 */
export const MAX_STREAMS_PER_ADDRESS = 32;
/** A comment line this often keeps proxies and load balancers from closing an idle stream. */
const HEARTBEAT_MS = 15_000;
/** How long the browser waits before it reconnects a dropped stream. */
const RECONNECT_MS = 3_000;
/** When the cap is reached: the caller may try again after this. */
const RETRY_AFTER_S = 60;

const state = globalThis as unknown as { __boundedProgressStreams?: Map<string, number> };
state.__boundedProgressStreams ??= new Map();
const openByAddress = state.__boundedProgressStreams;

/** How many streams an address holds open in this process. */
export function openStreams(address: string): number {
  return openByAddress.get(address) ?? 0;
}

function release(address: string): void {
  const n = openStreams(address) - 1;
  if (n > 0) openByAddress.set(address, n);
  else openByAddress.delete(address);
}

/** The version the browser last saw, from `Last-Event-ID` (sent by EventSource on a reconnect). */
export function lastSeenVersion(lastEventId: string | null | undefined): number {
  const id = Number(lastEventId ?? "");
  return Number.isSafeInteger(id) && id > 0 ? id : 0;
}

/** The headers of an event stream, wherever it is answered. */
export const EVENT_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "private, no-cache, no-transform",
  // nginx and others pass the events through at once instead of buffering them.
  "X-Accel-Buffering": "no",
};

/**
 * Counts a new stream of `address` unless it already holds `MAX_STREAMS_PER_ADDRESS`; returns the
 * function that gives the place back (once), or null when the address is at its cap.
 */
export function admitStream(address: string): (() => void) | null {
  if (openStreams(address) >= MAX_STREAMS_PER_ADDRESS) return null;
  openByAddress.set(address, openStreams(address) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    release(address);
  };
}

/** Where a stream's events are written: a Web stream (the route handlers) or a Node response (./front-door.ts). */
export interface EventSink {
  write(text: string): void;
  /** Ends the response: the job ended, or the process shuts down. */
  end(): void;
}

/**
 * Writes one job's events to `sink`: `retry`, the current answer (or `ready` when the caller
 * already has it), then each new version, ending the sink once the job has ended. Returns the
 * function to call when the caller goes away; either way the stream's place is given back.
 */
export function pumpEvents(
  sink: EventSink,
  stream: {
    token: string;
    lastSeen: number;
    initial: ProgressSnapshot;
    data: (snapshot: ProgressSnapshot) => string;
    release: () => void;
  },
): () => void {
  let sentVersion = stream.lastSeen;
  let closed = false;
  let unwatch = () => {};
  const send = (text: string) => {
    if (!closed) sink.write(text);
  };
  const heartbeat = setInterval(() => send(": keep-alive\n\n"), HEARTBEAT_MS);
  const stop = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    unwatch();
    stream.release();
  };
  const close = () => {
    if (closed) return;
    stop();
    sink.end();
  };
  const deliver = (snapshot: ProgressSnapshot) => {
    if (snapshot.version > sentVersion) {
      sentVersion = snapshot.version;
      send(`id: ${snapshot.version}\nevent: progress\ndata: ${stream.data(snapshot)}\n\n`);
    }
    if (snapshot.terminal) close();
  };
  void (async () => {
    const remove = await watch(stream.token, { deliver, close });
    if (closed) return remove();
    unwatch = remove;
    send(`retry: ${RECONNECT_MS}\n\n`);
    // Read again now that the subscription is live: a version published in between is not missed.
    const current = (await readStoredSnapshot(stream.token).catch(() => null)) ?? stream.initial;
    // `ready` answers a reconnect that already has the current version, never a version this
    // stream has just sent (the hub may deliver one before this read is back).
    if (current.version <= stream.lastSeen && !current.terminal)
      send(`event: ready\ndata: {"version":${current.version}}\n\n`);
    deliver(current);
  })().catch(close);
  return stop;
}

const encoder = new TextEncoder();

/**
 * `GET /api/progress/:token/events`: server-sent events of one job's answer. The link is checked
 * as for the page (404, same words); an address over `MAX_STREAMS_PER_ADDRESS` gets 429. The
 * stream first sends the current answer (or, on a reconnect that already has it, a `ready` event),
 * then each new version as `progress` events with the version as id, and ends by itself once the
 * job has ended. It only ever carries the answer of the token it was opened for. (A stream of a
 * job whose answer this process holds is opened before routing, the same way: ./front-door.ts.)
 */
export async function progressEventsResponse(request: Request, token: string, address: string): Promise<Response> {
  void ensureProgressListener();
  const initial = await getProgressSnapshot(token);
  if (!initial) return errorResponse(404, "not_found", progressLinkNotFoundMessage());
  return snapshotEvents(request, token, address, initial, (snapshot) => snapshot.body);
}

/**
 * The events of one job's snapshot as a Response, each version's data as `data` words it: the
 * customer's stream sends the answer itself, the operator's (./operator.ts) the facts the job page
 * draws from it.
 */
export function snapshotEvents(
  request: Request,
  token: string,
  address: string,
  initial: ProgressSnapshot,
  data: (snapshot: ProgressSnapshot) => string,
): Response {
  const release = admitStream(address);
  if (!release) {
    return errorResponse(
      429,
      "too_many_streams",
      `Too many live progress pages are open from your address (at most ${MAX_STREAMS_PER_ADDRESS}). Close a few; the pages still update by checking every few seconds.`,
      { headers: { "Retry-After": String(RETRY_AFTER_S) } },
    );
  }
  let stop = release;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const sink: EventSink = {
        write: (text) => controller.enqueue(encoder.encode(text)),
        end: () => {
          try {
            controller.close();
          } catch {
            // Already cancelled by the reader.
          }
        },
      };
      stop = pumpEvents(sink, {
        token,
        lastSeen: lastSeenVersion(request.headers.get("last-event-id")),
        initial,
        data,
        release,
      });
      request.signal.addEventListener("abort", () => {
        stop();
        sink.end();
      });
    },
    cancel() {
      stop();
    },
  });
  return new Response(body, { headers: EVENT_STREAM_HEADERS });
}

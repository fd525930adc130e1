import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { logger } from "@/lib/log";

const log = logger("simulators");

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** Values of `:name` segments in the route's path. */
  params: Record<string, string>;
}

export type Handler = (context: RequestContext) => Promise<void> | void;

/**
 * One endpoint. Each simulator module (model, later marketplace and images) exports its routes
 * under its own prefix (`/v1/...`, `/marketplace/...`, `/images/...`) and the server joins them.
 */
export interface Route {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** An exact path, with `:name` for a segment captured into `params` (`/images/jobs/:id`). */
  path: string;
  handler: Handler;
}

/** OpenAI's `code` and `param` of an error body (`"invalid_api_key"`, `"messages"`…); null when it has none. */
export interface ErrorDetail {
  code?: string | null;
  param?: string | null;
}

export class HttpError extends Error {
  override name = "HttpError";
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly detail: ErrorDetail = {},
  ) {
    super(message);
  }
}

/** The body the simulators answer errors with, shaped like OpenAI's so clients parse one format. */
export function errorBody(message: string, type: string, detail: ErrorDetail = {}) {
  return { error: { message, type, param: detail.param ?? null, code: detail.code ?? null } };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Reads and parses a JSON request body; a body over `limitBytes` or not JSON is a 4xx. */
export async function readJson(req: IncomingMessage, limitBytes = 1024 * 1024): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw new HttpError(413, `request body over ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new HttpError(400, "request body is not valid JSON");
  }
}

interface CompiledRoute extends Route {
  pattern: RegExp;
  names: string[];
}

function compile(route: Route): CompiledRoute {
  const names: string[] = [];
  const source = route.path
    .split("/")
    .map((segment) => {
      if (!segment.startsWith(":")) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      names.push(segment.slice(1));
      return "([^/]+)";
    })
    .join("/");
  return { ...route, pattern: new RegExp(`^${source}$`), names };
}

/** A request listener that dispatches to `routes`: 404 for unknown paths, 405 for wrong methods. */
export function createRouter(routes: Route[]): RequestListener {
  const compiled = routes.map(compile);
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://simulator.local");
    const matches = compiled.flatMap((route) => {
      const match = route.pattern.exec(url.pathname);
      return match ? [{ route, match }] : [];
    });
    const found = matches.find(({ route }) => route.method === req.method);
    if (!found) {
      if (matches.length > 0) {
        const allow = matches.map(({ route }) => route.method).join(", ");
        sendJson(res, 405, errorBody(`${req.method} not allowed on ${url.pathname}`, "invalid_request_error"), {
          allow,
        });
      } else {
        // OpenAI's answer to a path it does not serve (a base URL without /v1, a typo): the same status, body and code.
        const message = `Unknown request URL: ${req.method} ${url.pathname}. Please check the URL for typos, or see the docs at https://platform.openai.com/docs/api-reference/.`;
        sendJson(res, 404, errorBody(message, "invalid_request_error", { code: "unknown_url" }));
      }
      return;
    }
    Promise.resolve()
      .then(() => {
        // Inside the chain: a malformed %-escape throws, and must become a 500, not a crash.
        const params = Object.fromEntries(
          found.route.names.map((name, i) => [name, decodeURIComponent(found.match[i + 1]!)]),
        );
        return found.route.handler({ req, res, url, params });
      })
      .catch((err: unknown) => {
        if (res.headersSent) {
          res.destroy();
        } else if (err instanceof HttpError) {
          sendJson(res, err.status, errorBody(err.message, err.type, err.detail));
        } else {
          log.error({ err, method: req.method, path: url.pathname }, "simulator handler failed");
          sendJson(res, 500, errorBody("simulator handler failed", "server_error"));
        }
      });
  };
}

import "server-only";
import { revalidatePath } from "next/cache";
import type { z } from "zod";
import { audited } from "@/lib/audit/audited";
import type { AuditResult } from "@/lib/audit/audit";
import { Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { requireRole } from "@/lib/auth/principal";
import type { Principal } from "@/lib/auth/roles";
import type { Prisma } from "@/lib/db/client";
import { TenantBeingDeleted } from "@/lib/tenants/being-deleted";
import { errorResponse, route } from "./api";
import { readJsonBody } from "./body";
import type { ApiError } from "./errors";

/**
 * One outcome of an operator use case, told the one way the audit log, an API caller and a form
 * all read it. Each domain maps its tagged results to this in one function (`describeRetry`,
 * `describeSplit`, …); the helpers below only consume it.
 */
export type Described =
  | {
      /** The operation did what was asked: audited as "ok". */
      ok: true;
      status: number;
      code: string;
      /** What a person reads on the form; the audit entry's message unless `audit` says otherwise. */
      message: string;
      audit?: string;
      /** What an API caller gets. @defaultValue the result itself, with `message` */
      body?: unknown;
      headers?: Record<string, string>;
    }
  | {
      /** An expected failure: audited as "refused" (or "error" when `error` is set), answered as the error shape. */
      ok: false;
      status: number;
      code: string;
      message: string;
      audit?: string;
      /** Not the caller's doing (the queue was down): audited as "error" rather than "refused". */
      error?: true;
    };

/**
 * New work for a tenant being deleted, refused the one way every operator route and form tells it
 * (`TenantBeingDeleted` is thrown where the tenant's row is taken, so nothing was saved).
 */
export function describeTenantBeingDeleted(err: TenantBeingDeleted): Described {
  return { ok: false, status: 409, code: "tenant_being_deleted", message: err.message };
}

/** The one lib call, with a refusal for a tenant being deleted turned into its description. */
async function runDescribed<R>(
  run: () => Promise<R>,
  describe: (result: R) => Described,
): Promise<{ result: R | null; described: Described }> {
  try {
    const result = await run();
    return { result, described: describe(result) };
  } catch (err) {
    if (err instanceof TenantBeingDeleted) return { result: null, described: describeTenantBeingDeleted(err) };
    throw err;
  }
}

function auditResult(d: Described): AuditResult {
  return d.ok ? "ok" : d.error ? "error" : "refused";
}

/** Where a route's input comes from: a small JSON body (with an example to show when it is bad), or the query string. */
export type RouteInput<S extends z.ZodType> = { body: S; example: string } | { query: S };

type Input<S extends z.ZodType> = z.output<S>;

export interface OperatorRouteDeclaration<S extends z.ZodType, R, P> {
  /** For the log line of an unexpected error, e.g. "POST /api/jobs/:id/retry". */
  name: string;
  /**
   * The audit action ("job.retry"), or how the valid input chooses it (null when it is invalid).
   * Without one the route is a read that changes nothing: the role is checked, nothing recorded.
   */
  action?: string | ((input: Input<S> | null) => string);
  /** @defaultValue none: the route takes no input */
  input?: RouteInput<S>;
  /** What the call is about, for the audit log; the input is null when it is invalid. */
  target?: string | ((input: Input<S> | null, params: P) => string | null);
  /** What the audit entry keeps of a valid input. @defaultValue the input; an invalid one is `{ invalid: true }` */
  params?: (input: Input<S>) => Prisma.InputJsonValue;
  /** The one lib call. */
  run: (input: Input<S>, call: { principal: Principal; params: P }) => Promise<R>;
  /** The result told in words and statuses: usually the domain's one mapper (`describeRetry`). */
  describe: (result: R, input: Input<S>) => Described;
}

type ReadInput<T> = { ok: true; value: T } | { ok: false; error: ApiError | z.ZodError };

async function readInput<S extends z.ZodType>(
  request: Request,
  source: RouteInput<S> | undefined,
): Promise<ReadInput<Input<S>>> {
  if (!source) return { ok: true, value: undefined as Input<S> };
  if ("query" in source) {
    // Unknown params are the schema's business (`.strip()` to ignore them).
    const parsed = source.query.safeParse(Object.fromEntries(new URL(request.url).searchParams));
    return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: parsed.error };
  }
  const body = await readJsonBody(request, source.example);
  if (!body.ok) return { ok: false, error: body.error };
  const parsed = source.body.safeParse(body.value);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: parsed.error };
}

function respond(result: unknown, d: Described): Response {
  if (!d.ok) return errorResponse(d.status, d.code, d.message);
  const body = d.body !== undefined ? d.body : { ...(result as object), message: d.message };
  return Response.json(body, { status: d.status, headers: d.headers });
}

/**
 * An operator route handler from its declaration. The order is the same for every one: the input
 * is read and parsed, the role is checked on the server (a refusal is audited, then answered 401
 * or 403 before any word about the input), a bad input is audited as refused and answered with
 * its 4xx (422 with the issues for bad fields), and only then the one lib call runs; its outcome
 * is audited and answered as its `describe` says. Exactly one audit entry per call.
 */
export function operatorRoute<S extends z.ZodType = z.ZodUndefined, R = unknown, P = Record<string, never>>(
  decl: OperatorRouteDeclaration<S, R, P>,
) {
  return route<{ params: Promise<P> }>(
    "public", // the role is checked below, so that a refusal is recorded too
    async (request, ctx) => {
      const params = ((await ctx?.params) ?? {}) as P;
      const read = await readInput(request, decl.input);
      const input = read.ok ? read.value : null;
      const call = (principal: Principal, value: Input<S>) =>
        runDescribed(
          () => decl.run(value, { principal, params }),
          (result) => decl.describe(result, value),
        );

      if (!decl.action) {
        const principal = await requireRole("operator");
        if (!read.ok) throw read.error;
        const { result, described } = await call(principal, read.value);
        return respond(result, described);
      }

      const action = typeof decl.action === "function" ? decl.action(input) : decl.action;
      const target = typeof decl.target === "function" ? decl.target(input, params) : (decl.target ?? null);
      const auditParams = read.ok
        ? decl.params
          ? decl.params(read.value)
          : (read.value as Prisma.InputJsonValue | undefined)
        : { invalid: true };
      const outcome = await audited(
        "operator",
        { action, target, params: auditParams, via: decl.name },
        async (principal) => {
          if (!read.ok) return { result: "refused", message: "refused: invalid request", value: null };
          const o = await call(principal, read.value);
          return { result: auditResult(o.described), message: o.described.audit ?? o.described.message, value: o };
        },
      );
      if (!read.ok) throw read.error;
      return respond(outcome!.result, outcome!.described);
    },
    decl.name,
  );
}

/** What an operator form shows after its action: whether it worked, and the words why. */
export interface ActionState {
  ok?: boolean;
  message?: string;
}

export interface OperatorActionDeclaration<Raw, S extends z.ZodType, R, State extends ActionState> {
  /** The audit action, or how the fields as sent choose it (they may be invalid). */
  action: string | ((raw: Raw) => string);
  /** The form's fields as sent: what `schema` parses, and what target and revalidation read even when invalid. */
  fields: (form: FormData) => Raw;
  schema: S;
  target?: (raw: Raw) => string | null;
  /** What the audit entry keeps of a valid input. @defaultValue the input; an invalid one is `{ invalid: true }` */
  params?: (input: Input<S>) => Prisma.InputJsonValue;
  /**
   * How a form that does not parse is told: the audit records `refused: <problem>`, the form shows
   * `message`. @defaultValue the first issue's message, for both
   */
  invalid?: (error: z.ZodError) => { problem: string; message: string };
  /** The one lib call: the same as the API route's for the same operation. */
  run: (input: Input<S>, principal: Principal) => Promise<R>;
  describe: (result: R, input: Input<S>) => Described;
  /** @defaultValue `{ ok, message }` of the description */
  state?: (result: R, described: Described, input: Input<S>) => State;
  /** The page to redraw after the action ran (not after a refusal: nothing changed). */
  revalidate?: (raw: Raw) => string | null;
}

function firstIssue(error: z.ZodError): { problem: string; message: string } {
  const message = error.issues[0]?.message ?? "The form could not be read.";
  return { problem: message, message };
}

/**
 * A server action from its declaration, the twin of `operatorRoute`: anyone can post anything to
 * an action, so the fields are parsed, never trusted; the role is checked on the server and a
 * refusal is audited, then shown on the form (not thrown: the form is where the person is).
 */
export function operatorAction<Raw, S extends z.ZodType, R, State extends ActionState = ActionState>(
  decl: OperatorActionDeclaration<Raw, S, R, State>,
): (prev: State, form: FormData) => Promise<State> {
  return async (_prev, form) => {
    const raw = decl.fields(form instanceof FormData ? form : new FormData());
    const parsed = decl.schema.safeParse(raw);
    const action = typeof decl.action === "function" ? decl.action(raw) : decl.action;
    const auditParams = parsed.success
      ? decl.params
        ? decl.params(parsed.data)
        : (parsed.data as Prisma.InputJsonValue)
      : { invalid: true };
    try {
      const state = await audited<State>(
        "operator",
        { action, target: decl.target?.(raw) ?? null, params: auditParams, via: `action ${action}` },
        async (principal) => {
          if (!parsed.success) {
            const { problem, message } = (decl.invalid ?? firstIssue)(parsed.error);
            return { result: "refused", message: `refused: ${problem}`, value: { ok: false, message } as State };
          }
          const { result, described: d } = await runDescribed(
            () => decl.run(parsed.data, principal),
            (r) => decl.describe(r, parsed.data),
          );
          const value =
            decl.state && result !== null
              ? decl.state(result, d, parsed.data)
              : ({ ok: d.ok, message: d.message } as State);
          return { result: auditResult(d), message: d.audit ?? d.message, value };
        },
      );
      const path = decl.revalidate?.(raw);
      if (path) revalidatePath(path);
      return state;
    } catch (err) {
      if (err instanceof Unauthenticated || err instanceof Forbidden)
        return { ok: false, message: err.message } as State;
      throw err;
    }
  };
}

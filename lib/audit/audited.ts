import "server-only";
import type { Prisma } from "@/lib/db/client";
import { CrossOriginRefused, Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { currentPrincipal } from "@/lib/auth/principal";
import { hasRole, type Principal, type Role } from "@/lib/auth/roles";
import { principalFromSession } from "@/lib/auth/session";
import { clientAddress } from "@/lib/security/client-address";
import { recordAudit, type AuditResult } from "./audit";
import { markRecorded, recordRefusal } from "./refusals";

export interface AuditedAction {
  /** What is done, e.g. "job.retry". */
  action: string;
  target?: string | null;
  params?: Prisma.InputJsonValue;
  /** What anonymous refusals are counted under: the route or form the call came through. @defaultValue the action */
  via?: string;
}

export interface ActionOutcome<T> {
  result: AuditResult;
  /** What happened, in words, for the audit log. */
  message: string;
  value: T;
}

/**
 * Runs an action under a role: the role is checked on the server, and the action leaves exactly
 * one audit entry — allowed, refused (with why) or failed. A caller without credentials is counted
 * with the other anonymous refusals of its address and minute, and only the first of them is an
 * entry (lib/audit/refusals.ts), so a flood does not flood the log. A refusal throws `Unauthenticated` / `Forbidden` after it is
 * recorded. Operator routes and server actions reach it through `operatorRoute` / `operatorAction`
 * (lib/http/operator.ts), which add the parsing and the answer.
 */
export async function audited<T>(
  needed: Role,
  what: AuditedAction,
  run: (principal: Principal) => Promise<ActionOutcome<T>>,
): Promise<T> {
  const address = await clientAddress();
  const base = { action: what.action, target: what.target ?? null, params: what.params, clientAddress: address };
  let principal: Principal | null;
  try {
    principal = await currentPrincipal();
  } catch (err) {
    if (!(err instanceof CrossOriginRefused)) throw err;
    await recordAudit({ ...base, principal: await principalFromSession(), result: "refused", message: err.message });
    throw markRecorded(err);
  }
  if (!principal) {
    const entry = { action: what.action, target: what.target, params: what.params, message: "refused: not signed in" };
    await recordRefusal({
      principal: null,
      address,
      route: what.via ?? what.action,
      status: 401,
      reason: "not signed in",
      entry,
    });
    throw markRecorded(new Unauthenticated());
  }
  if (!hasRole(principal, needed)) {
    const message = `This needs the ${needed} role; you are signed in as ${principal.role}.`;
    await recordAudit({ ...base, principal, result: "refused", message: `refused: ${message}` });
    throw markRecorded(new Forbidden(message));
  }
  try {
    const outcome = await run(principal);
    await recordAudit({ ...base, principal, result: outcome.result, message: outcome.message });
    return outcome.value;
  } catch (err) {
    await recordAudit({
      ...base,
      principal,
      result: "error",
      message: `failed: ${err instanceof Error ? err.message : String(err)}`,
    });
    throw err;
  }
}

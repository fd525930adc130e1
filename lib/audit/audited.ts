import "server-only";
import type { Prisma } from "@/lib/db/client";
import { Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { currentPrincipal } from "@/lib/auth/principal";
import { hasRole, type Principal, type Role } from "@/lib/auth/roles";
import { clientAddress } from "@/lib/http/client-address";
import { recordAudit, type AuditResult } from "./audit";

export interface AuditedAction {
  /** What is done, e.g. "job.retry". */
  action: string;
  target?: string | null;
  params?: Prisma.InputJsonValue;
}

export interface ActionOutcome<T> {
  result: AuditResult;
  /** What happened, in words, for the audit log. */
  message: string;
  value: T;
}

/**
 * Runs an action under a role: the role is checked on the server, and the action leaves exactly
 * one audit entry — allowed, refused (with why) or failed. A refusal throws `Unauthenticated` /
 * `Forbidden` after it is recorded. Operator routes and server actions reach it through
 * `operatorRoute` / `operatorAction` (lib/http/operator.ts), which add the parsing and the answer.
 */
export async function audited<T>(needed: Role, what: AuditedAction, run: (principal: Principal) => Promise<ActionOutcome<T>>): Promise<T> {
  const principal = await currentPrincipal();
  const base = { action: what.action, target: what.target ?? null, params: what.params, clientAddress: await clientAddress() };
  if (!principal) {
    await recordAudit({ ...base, principal: null, result: "refused", message: "refused: not signed in" });
    throw new Unauthenticated();
  }
  if (!hasRole(principal, needed)) {
    const message = `This needs the ${needed} role; you are signed in as ${principal.role}.`;
    await recordAudit({ ...base, principal, result: "refused", message: `refused: ${message}` });
    throw new Forbidden(message);
  }
  try {
    const outcome = await run(principal);
    await recordAudit({ ...base, principal, result: outcome.result, message: outcome.message });
    return outcome.value;
  } catch (err) {
    await recordAudit({ ...base, principal, result: "error", message: `failed: ${err instanceof Error ? err.message : String(err)}` });
    throw err;
  }
}

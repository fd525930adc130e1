import "server-only";
import { CrossOriginRefused, Unauthenticated } from "@/lib/auth/errors";
import { currentPrincipal } from "@/lib/auth/principal";
import type { Principal } from "@/lib/auth/roles";
import { principalFromSession } from "@/lib/auth/session";
import { clientAddress } from "@/lib/security/client-address";
import { isRecorded, recordRefusalQuietly } from "./refusals";

const REFUSALS = new Set([401, 403, 429]);

async function refusedPrincipal(err: unknown): Promise<Principal | null> {
  if (err instanceof Unauthenticated) return null;
  try {
    return await currentPrincipal();
  } catch (e) {
    return e instanceof CrossOriginRefused ? principalFromSession() : null;
  }
}

/**
 * Records a route's 401/403/429 answer (with who, from where, and why) unless the refusal was
 * recorded where it happened (`audited`). Never fails the answer.
 */
export async function auditRefusedCall(route: string, response: Response, err: unknown): Promise<void> {
  if (!REFUSALS.has(response.status) || isRecorded(err)) return;
  const reason = err instanceof Error ? err.message : `answered ${response.status}`;
  try {
    await recordRefusalQuietly({
      principal: await refusedPrincipal(err),
      address: await clientAddress(),
      route,
      status: response.status,
      reason,
    });
  } catch {
    // Outside a request (a test calling a handler directly) there are no headers to read.
  }
}

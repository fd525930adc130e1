import "server-only";
import { currentPrincipal } from "@/lib/auth/principal";
import { clientAddress } from "@/lib/security/client-address";
import { withUploadSlot } from "./upload-limits";

/**
 * An upload of this request under its caller's limits: a signed-in user (session or token) is
 * counted as the user, anyone else by address. Uploads are public, so credentials that do not
 * count here (another site's page, a revoked token) only make the caller anonymous.
 */
export async function withRequestUploadSlot<T>(
  request: Request,
  fallbackBytes: number,
  run: () => Promise<T>,
): Promise<T> {
  const caller = await callerOf().catch(() => "address:unknown"); // outside a request (a handler called directly): no headers
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  return withUploadSlot(caller, Number.isFinite(declared) ? declared : fallbackBytes, run);
}

async function callerOf(): Promise<string> {
  const principal = await currentPrincipal().catch(() => null);
  return principal ? `user:${principal.userId}` : `address:${await clientAddress()}`;
}

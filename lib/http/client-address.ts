import "server-only";
import { headers } from "next/headers";

/**
 * The caller's address as the proxy in front reports it (first X-Forwarded-For hop), for audit
 * entries and sign-in limits. Without a proxy setting it, "direct".
 */
export async function clientAddress(): Promise<string> {
  const h = await headers();
  return h.get("x-forwarded-for")?.split(",")[0]?.trim() || h.get("x-real-ip") || "direct";
}

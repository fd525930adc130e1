import "server-only";
import type { BlockList } from "node:net";
import { headers } from "next/headers";
import { env } from "@/lib/env";
import { peerAddress } from "./peer-address";
import { parseTrustedProxies, resolveClientAddress } from "./trusted-proxies";

let trusted: { list: string; blocks: BlockList } | undefined;

/**
 * The caller's address from its socket peer and its `X-Forwarded-For`: the peer, or what a
 * configured trusted proxy (BOUNDED_TRUSTED_PROXIES) reports. For a request Next.js has not seen
 * (lib/progress/front-door.ts); route handlers use `clientAddress`.
 */
export function clientAddressOf(peer: string | null, forwardedFor: string | null): string {
  const list = env().BOUNDED_TRUSTED_PROXIES;
  if (trusted?.list !== list) trusted = { list, blocks: parseTrustedProxies(list) };
  return resolveClientAddress(peer, forwardedFor, trusted.blocks);
}

/**
 * The caller's address, for audit entries and rate limits: the socket peer, or what a configured
 * trusted proxy (BOUNDED_TRUSTED_PROXIES) reports in X-Forwarded-For. A forged header from anyone
 * else changes nothing.
 */
export async function clientAddress(): Promise<string> {
  const h = await headers();
  return clientAddressOf(peerAddress(h), h.get("x-forwarded-for"));
}

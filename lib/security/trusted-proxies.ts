import { BlockList, isIP } from "node:net";

/**
 * The proxies whose `X-Forwarded-For` is believed (BOUNDED_TRUSTED_PROXIES: addresses and CIDRs,
 * comma-separated; default none). Anyone else can write anything into that header, so from an
 * untrusted peer the socket address is the client.
 */
export function parseTrustedProxies(list: string): BlockList {
  const blocks = new BlockList();
  for (const raw of list
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [address, bits] = raw.split("/");
    const family = isIP(address ?? "");
    if (!address || family === 0) throw new Error(`"${raw}" is not an IP address or CIDR`);
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) blocks.addAddress(address, type);
    else {
      const prefix = Number(bits);
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128))
        throw new Error(`"${raw}" has an invalid prefix length`);
      blocks.addSubnet(address, prefix, type);
    }
  }
  return blocks;
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) is `10.0.0.1`. */
function normalize(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

function isTrusted(trusted: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && trusted.check(address, family === 4 ? "ipv4" : "ipv6");
}

/**
 * The client of a request: the socket peer, unless the peer is a trusted proxy — then the hop it
 * reports, walking `X-Forwarded-For` from the right while each hop is itself trusted. The first
 * untrusted hop is the client (hops further left were written by whoever that was). Null peer
 * (no stamp in this process): "unknown", one shared address, never a client-chosen one.
 */
export function resolveClientAddress(peer: string | null, forwardedFor: string | null, trusted: BlockList): string {
  if (!peer) return "unknown";
  let client = normalize(peer);
  const hops = (forwardedFor ?? "")
    .split(",")
    .map((h) => normalize(h.trim()))
    .filter(Boolean);
  while (isTrusted(trusted, client) && hops.length > 0) {
    const next = hops.pop()!;
    if (isIP(next) === 0) break;
    client = next;
  }
  return client;
}

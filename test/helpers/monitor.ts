import { randomUUID } from "node:crypto";
import { connect, type Socket } from "node:net";
import type { Redis } from "ioredis";
import { createRedis, type RedisClient } from "@/lib/redis/client";
import { waitFor } from "./wait";

/**
 * Runs `read` on a connection of its own and returns what it did, with the commands that
 * connection sent, lower-case, as Redis's MONITOR saw them (on the server `watcher` is connected
 * to). MONITOR is read from a plain socket: ioredis's own monitor mode can take a line that
 * arrives with MONITOR's "OK" for a reply ("Command queue state error") when other processes keep
 * Redis busy, as the other test files running at once do.
 */
export async function commandsSent<T>(
  watcher: RedisClient,
  read: (reader: RedisClient) => Promise<T>,
): Promise<{ result: T; sent: string[] }> {
  const { host = "127.0.0.1", port = 6379 } = (watcher as Redis).options;
  const reader = createRedis("producer", { enableOfflineQueue: true });
  const monitor = await monitorOf(host, port);
  try {
    const info = (await reader.call("CLIENT", "INFO")) as string;
    const address = / addr=(\S+)/.exec(info)![1]!;
    // What the reader sends between two markers of its own; once MONITOR shows the second, every
    // command before it is in.
    const [before, after] = [`monitor-from-${randomUUID()}`, `monitor-to-${randomUUID()}`];
    await reader.echo(before);
    const result = await read(reader);
    await reader.echo(after);
    const marked = (marker: string) => (l: MonitorLine) => l.source === address && l.args[1] === marker;
    await waitFor(() => monitor.lines.some(marked(after)), {
      timeoutMs: 10_000,
      what: "MONITOR to show the reader's last command",
    });
    const mine = monitor.lines.filter((l) => l.source === address);
    const sent = mine
      .slice(mine.findIndex(marked(before)) + 1, mine.findIndex(marked(after)))
      .map((l) => l.args[0]!.toLowerCase());
    return { result, sent };
  } finally {
    monitor.socket.destroy();
    reader.disconnect();
  }
}

/** One line of MONITOR: the client's address and the command's arguments. */
interface MonitorLine {
  source: string;
  args: string[];
}

/** A plain connection in MONITOR mode, its lines parsed as they come; resolves once Redis said OK. */
function monitorOf(host: string, port: number): Promise<{ socket: Socket; lines: MonitorLine[] }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const lines: MonitorLine[] = [];
    let buffered = "";
    socket.setEncoding("utf8");
    socket.once("error", reject);
    socket.on("connect", () => socket.write("MONITOR\r\n"));
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let end = buffered.indexOf("\r\n");
      while (end >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (line === "+OK") resolve({ socket, lines });
        else if (line.startsWith("-")) reject(new Error(`MONITOR refused: ${line.slice(1)}`));
        else {
          const parsed = parseMonitorLine(line);
          if (parsed) lines.push(parsed);
        }
        end = buffered.indexOf("\r\n");
      }
    });
  });
}

/** `+1796640661.626516 [0 127.0.0.1:58746] "evalsha" "1fcf…" "4"` → its source and arguments. */
function parseMonitorLine(line: string): MonitorLine | null {
  const head = /^\+\d+\.\d+ \[\d+ (\S+)\] /.exec(line);
  if (!head) return null;
  const args = [...line.slice(head[0].length).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
  return { source: head[1]!, args };
}
